package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The receiving hookpace is killed in the middle of a hand-off and
// started again on the same address: the stopping one retries, sends the
// keys it had staged there again, and every ordering key reaches the
// partner whole, once, in order (0 inversions), delivered by the
// receiver; the stopping one exits 0 with nothing left.
func TestHandoffKeysAcrossReceiverRestartE2E(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	p := newOrderPartner()
	rc.Handle = p.handle
	secret := handoffSecret(t)
	bCfg := fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 1000/s, burst: 100, concurrency: 8}
shutdown: {handoff_secret_file: %s}
`, rc.Host(), secret)
	b := Start(t, bCfg)
	a := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 1/s, burst: 1, concurrency: 1}
shutdown: {timeout: 30s, handoff: "http://%s", handoff_secret_file: %s}
`, rc.Host(), b.Proxy, secret))
	const keys, per = 8, 150
	for seq := range per {
		postKeyed(t, a, rc, seq*keys, (seq+1)*keys, 8, func(i int) http.Header {
			return orderHeader(fmt.Sprint("k", i%keys), i/keys+1)
		})
	}
	a.Signal(syscall.SIGTERM)
	Poll(t, 30*time.Second, "B staging A's keys", func() bool {
		return strings.Count(b.Log(), "handoff_from=") >= keys*per/4
	})
	addr := b.Proxy
	b.Kill()
	// Started again where A sends its hand-off.
	writeConfig(t, b.Config, addr, "127.0.0.1:0", filepath.Join(b.Dir, "spool"), bCfg)
	b.Restart()
	if code := a.Wait(60 * time.Second); code != 0 {
		t.Fatalf("A exited %d\n%s", code, a.Log())
	}
	log := a.Log()
	if left := logInt(t, log, "handoff ended", "left"); left != 0 {
		t.Fatalf("%d left with A\n%s", left, log)
	}
	if got := logInt(t, log, "handoff ended", "ordering_keys"); got != keys {
		t.Errorf("A handed off %d ordering keys whole, want %d\n%s", got, keys, log)
	}
	if strings.Contains(log, "ordering key split") || logInt(t, log, "handoff ended", "retried") == 0 {
		t.Errorf("A split a key, or retried nothing across B's restart\n%s", log)
	}
	rc.WaitFor(t, 60*time.Second, "every webhook delivered", func(as []Arrival) bool { return Delivered2xx(as) >= keys*per })
	if inversions := p.keysInOrder(t, keys, per); inversions != 0 {
		t.Errorf("%d inversions at the partner, want 0", inversions)
	}
	for _, e := range p.earlyOnes() {
		t.Error(e)
	}
	t.Logf("A: %d handed off, %d retried; B staged %d after its restart", logInt(t, log, "handoff ended", "handed_off"),
		logInt(t, log, "handoff ended", "retried"), strings.Count(b.Log(), "decision=handoff_staged"))
}

// The receiving hookpace is killed in the middle of a hand-off and stays
// down past the stopping one's budget: it had stored nothing of the keys
// it was being sent (they were staged), so they all stay with the
// stopping one, whole, and its log names them. Started again on its
// volume, it delivers every key in order (0 inversions), each webhook
// once; the receiver, back too, holds none of them.
func TestHandoffKeysStayWholePastBudgetE2E(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	p := newOrderPartner()
	rc.Handle = p.handle
	b := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 1000/s, burst: 100, concurrency: 8}
`, rc.Host()))
	a := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 1000/s, burst: 100, concurrency: 8}
shutdown: {timeout: 8s, handoff: "http://%s"}
`, rc.Host(), b.Proxy))
	pauseHost(t, a, rc.Host())
	const keys, per = 8, 150
	for seq := range per {
		postKeyed(t, a, rc, seq*keys, (seq+1)*keys, 8, func(i int) http.Header {
			return orderHeader(fmt.Sprint("k", i%keys), i/keys+1)
		})
	}
	a.Signal(syscall.SIGTERM)
	Poll(t, 30*time.Second, "B staging A's keys", func() bool {
		return strings.Count(b.Log(), "handoff_from=") >= keys*per/4
	})
	b.Kill()
	if code := a.Wait(60 * time.Second); code != 1 {
		t.Fatalf("A exited %d, want 1 (webhooks left)\n%s", code, a.Log())
	}
	log := a.Log()
	if left := logInt(t, log, "handoff ended", "left"); left != keys*per {
		t.Errorf("%d left with A, want all %d\n%s", left, keys*per, log)
	}
	if kept := logInt(t, log, "handoff ended", "ordering_keys_kept"); kept != keys || strings.Count(log, "ordering key kept here whole") != keys ||
		strings.Contains(log, "ordering key split") {
		t.Errorf("A kept %d keys whole, want %d, each named, none split\n%s", kept, keys, log)
	}
	b.Restart()
	var bh struct {
		Messages int64 `json:"messages"`
	}
	b.AdminJSON("/v1/spool", &bh)
	if bh.Messages != 0 {
		t.Errorf("B holds %d webhooks after its restart: part of a key A kept", bh.Messages)
	}
	a.Restart()
	resumeHost(t, a, rc.Host())
	rc.WaitFor(t, 60*time.Second, "every webhook delivered by A", func(as []Arrival) bool { return Delivered2xx(as) >= keys*per })
	if inversions := p.keysInOrder(t, keys, per); inversions != 0 {
		t.Errorf("%d inversions at the partner, want 0", inversions)
	}
	if got := Delivered2xx(rc.Arrivals()); got != keys*per {
		t.Errorf("%d delivered, want %d", got, keys*per)
	}
	t.Logf("B held %d after its restart; A kept %d keys", bh.Messages, logInt(t, log, "handoff ended", "ordering_keys_kept"))
}
