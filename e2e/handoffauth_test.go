package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// handoffSecret writes a hand-off secret file and returns its path.
func handoffSecret(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "handoff-secret")
	if err := os.WriteFile(p, []byte(strings.Repeat("5e", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// nextID is the id after id in its spool: what a forger would guess.
func nextID(t *testing.T, id string) string {
	seq, err := strconv.ParseUint(id[16:], 16, 64)
	if len(id) != 32 || err != nil {
		t.Fatalf("id %q: want 32 hex digits", id)
	}
	return fmt.Sprintf("%s%016x", id[:16], seq+1)
}

// A client of the receiving hookpace sends webhooks claiming,
// through X-Hookpace-Handoff-From, ids of another replica's spool (the
// ids of its queued webhooks, and the next one). With the hand-off secret
// on both ends those claims are refused, and the real webhooks, handed
// off at the replica's SIGTERM, reach the partner under their ids, once
// each. A receiving hookpace without the secret ignores the claim (its
// own id) and says so once.
func TestForgedHandoffIDs(t *testing.T) {
	t.Parallel()
	secret := handoffSecret(t)
	rc := NewReceiver(t)
	b := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 100/s, burst: 10}
shutdown: {handoff_secret_file: %s}
`, rc.Host(), secret))
	a := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 1/h, burst: 1}
shutdown: {timeout: 10s, handoff: "http://%s", handoff_secret_file: %s}
`, rc.Host(), b.Proxy, secret))
	// The first goes out at once (the burst); the other two wait at A.
	ids := make([]string, 3)
	for i := range ids {
		status, id := a.Post(a.Client(), fmt.Sprintf("%s/real/%d", rc.URL, i), []byte(fmt.Sprintf(`{"real":%d}`, i)), nil)
		if status != http.StatusAccepted || len(id) != 32 {
			t.Fatalf("webhook %d at A: %d %q", i, status, id)
		}
		ids[i] = id
	}
	rc.WaitFor(t, 10*time.Second, "A's first delivery", func(as []Arrival) bool { return len(as) == 1 })

	// A third client of B's forges claims: A's queued ids, and the next.
	forge := func(hp *Hookpace, claim, sig string) (int, string) {
		hdr := http.Header{"X-Hookpace-Handoff-From": {"pod-a/" + claim}}
		if sig != "" {
			hdr.Set("X-Hookpace-Handoff-Signature", sig)
		}
		status, h, _ := PostRaw(t, hp.Client(), rc.URL+"/forged", []byte(`{"forged":true}`), hdr)
		return status, h.Get("X-Hookpace-Id")
	}
	for _, claim := range []string{ids[1], ids[2], nextID(t, ids[2])} {
		for _, sig := range []string{"", "v1=" + strings.Repeat("00", 32)} {
			if status, id := forge(b, claim, sig); status != http.StatusForbidden {
				t.Errorf("forged claim %s (signature %q): %d id %q, want 403", claim, sig, status, id)
			}
		}
	}
	Poll(t, 10*time.Second, "B's log saying why it refused the claims", func() bool {
		return strings.Count(b.Log(), "does not check") == 3 && strings.Count(b.Log(), "without X-Hookpace-Handoff-Signature") == 3
	})

	a.Signal(syscall.SIGTERM)
	if code := a.Wait(30 * time.Second); code != 0 {
		t.Fatalf("A's exit code %d, want 0\n%s", code, a.Log())
	}
	rc.WaitFor(t, 20*time.Second, "the two handed-off webhooks", func(as []Arrival) bool { return len(as) >= 3 })
	byID := map[string][]string{}
	for _, x := range rc.Arrivals() {
		byID[x.Header.Get("X-Hookpace-Id")] = append(byID[x.Header.Get("X-Hookpace-Id")], string(x.Body))
	}
	for i, id := range ids {
		if got := byID[id]; len(got) != 1 || got[0] != fmt.Sprintf(`{"real":%d}`, i) {
			t.Errorf("id %s: the partner got %q, want the real webhook %d once", id, got, i)
		}
	}
	if n := rc.Count(func(x Arrival) bool { return x.Path == "/forged" }); n != 0 {
		t.Errorf("%d forged webhooks delivered", n)
	}

	// A hookpace without the secret gives its own ids, and says so once.
	other := NewReceiver(t)
	c := Start(t, "egress: {allow: [\"127.0.0.0/8\"]}\n")
	for _, claim := range []string{ids[1], nextID(t, ids[2])} {
		status, h, _ := PostRaw(t, c.Client(), other.URL+"/forged",
			[]byte(`{}`), http.Header{"X-Hookpace-Handoff-From": {"pod-a/" + claim}})
		if id := h.Get("X-Hookpace-Id"); status != http.StatusAccepted || id == claim || id[:16] == claim[:16] {
			t.Errorf("without a secret, claim %s: %d id %q, want 202 with an id of its own spool", claim, status, id)
		}
	}
	Poll(t, 10*time.Second, "the ingest lines of both", func() bool { return strings.Count(c.Log(), "msg=ingest") == 2 })
	if n := strings.Count(c.Log(), "hand-off claims ignored"); n != 1 {
		t.Errorf("%d lines say hand-off claims are ignored, want 1:\n%s", n, c.Log())
	}
}
