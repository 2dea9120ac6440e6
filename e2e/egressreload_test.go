package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// A host is paused with webhooks queued and a
// keep-alive connection to it open; egress.deny gains it by reload, and the
// host is resumed: nothing is delivered, and the webhooks become dead
// letters with the egress reason.
func TestEgressDenyByReloadReachesQueuedWebhooks(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, `egress: {allow: ["127.0.0.0/8"]}`)
	H := rc.Host()
	PostAll(t, hp, 1, 1, func(int) string { return rc.URL + "/first" })
	rc.WaitFor(t, 10*time.Second, "the first webhook (its connection stays open)", func(as []Arrival) bool { return len(as) == 1 })
	if out, err := hp.CLI("pause", H); err != nil {
		t.Fatalf("pause: %v\n%s", err, out)
	}
	const n = 4
	PostAll(t, hp, n, n, func(i int) string { return fmt.Sprintf("%s/queued/%d", rc.URL, i) })

	orig, err := os.ReadFile(hp.Config)
	if err != nil {
		t.Fatal(err)
	}
	denied := strings.Replace(string(orig), "- 127.0.0.0/8", "- 127.0.0.0/8\n    deny:\n        - 127.0.0.1", 1)
	if denied == string(orig) {
		t.Fatalf("could not add egress.deny to:\n%s", orig)
	}
	opsRewriteConfig(t, hp, denied)
	Poll(t, 10*time.Second, "the reload", func() bool { return strings.Contains(hp.Log(), "config reloaded") })
	if out, err := hp.CLI("resume", H); err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	Poll(t, 20*time.Second, "4 dead letters", func() bool { total, _ := failDeadList(t, hp); return total == n })
	_, dead := failDeadList(t, hp)
	for _, d := range dead {
		if !strings.Contains(d.Reason, "egress refused") || !strings.Contains(d.Reason, "127.0.0.1") {
			t.Errorf("dead letter %s: reason %q, want the egress refusal", d.ID, d.Reason)
		}
	}
	if got := rc.Count(nil); got != 1 {
		t.Errorf("receiver got %d requests, want only the first", got)
	}
}
