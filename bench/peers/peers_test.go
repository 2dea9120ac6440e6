package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestBodyIsOneKiBAndCarriesItsSeq(t *testing.T) {
	for _, c := range []struct{ gen, i int }{{1, 0}, {7, 9999}, {123, 1234567}} {
		b := body(c.gen, c.i)
		if len(b) != bodySize {
			t.Errorf("body(%d, %d) is %d bytes, want %d", c.gen, c.i, len(b), bodySize)
		}
		// Delivered wrapped in an envelope, as a peer may do, the seq is found all the same.
		wrapped := append(append([]byte(`{"id":"x","payload":`), b...), '}')
		gen, i, ok := parseSeq(wrapped)
		if !ok || gen != c.gen || i != c.i {
			t.Errorf("parseSeq(body(%d, %d)) = %d, %d, %v", c.gen, c.i, gen, i, ok)
		}
	}
	if _, _, ok := parseSeq([]byte(`{"seq":"g1"}`)); ok {
		t.Error("parseSeq accepted a seq without an index")
	}
}

func TestWriteDocReplacesItsSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "performance.md")
	if err := os.WriteFile(path, []byte("# Performance\n\nBefore.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeDoc(path, "## Run one\n"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(must(os.ReadFile(path)), "\n## After\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeDoc(path, "## Run two\n"); err != nil {
		t.Fatal(err)
	}
	got := string(must(os.ReadFile(path)))
	want := "# Performance\n\nBefore.\n\n" + docBegin + "\n## Run two\n" + docEnd + "\n\n## After\n"
	if got != want {
		t.Errorf("after two runs:\n%s\nwant:\n%s", got, want)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// A process the system started that has exited keeps counting: a
// PostgreSQL backend that ended is in its postmaster's cutime.
func TestTreeCPUCountsExitedDescendants(t *testing.T) {
	if os.Getenv("PEERS_BURN") != "" {
		// 300 ms of CPU, however long the machine takes to give it.
		for {
			var ru syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
			if time.Duration(ru.Utime.Nano()+ru.Stime.Nano()) >= 300*time.Millisecond {
				break
			}
		}
		os.WriteFile(os.Getenv("PEERS_BURN"), nil, 0o644)
		return
	}
	done := filepath.Join(t.TempDir(), "done")
	// sh waits for the burner, then sleeps: the burner's CPU is then only
	// in sh's cutime.
	cmd := exec.Command("sh", "-c", `"$0" -test.run '^TestTreeCPUCountsExitedDescendants$'; exec sleep 60`, os.Args[0])
	cmd.Env = append(os.Environ(), "PEERS_BURN="+done)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
	}()
	sh := cmd.Process.Pid
	deadline := time.Now().Add(60 * time.Second)
	for {
		comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(sh), "comm"))
		if _, err := os.Stat(done); err == nil && strings.TrimSpace(string(comm)) == "sleep" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the burner did not finish within 60 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := treeCPU([]int{sh}); got < 250*time.Millisecond {
		t.Errorf("treeCPU after a 300 ms burner exited = %v, want at least 250ms", got)
	}
}
