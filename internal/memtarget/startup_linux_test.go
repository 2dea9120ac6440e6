package memtarget

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// rssFile reads this process's resident file-backed pages, in KiB.
func rssFile(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

func TestReleaseStartupGivesBackTheExecutablesPages(t *testing.T) {
	before := rssFile(t)
	ReleaseStartup()
	after := rssFile(t)
	if after >= before/2 {
		t.Fatalf("RssFile %d KiB before, %d KiB after: want less than half", before, after)
	}
	t.Logf("RssFile %d KiB before, %d KiB after", before, after)
}
