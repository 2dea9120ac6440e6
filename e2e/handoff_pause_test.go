package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hostState is what these tests read of GET /v1/hosts/{host}.
type hostState struct {
	Queued     int64      `json:"queued"`
	Paused     bool       `json:"paused"`
	PausedWhy  string     `json:"paused_why"`
	HeldUntil  *time.Time `json:"held_until"`
	HoldReason string     `json:"hold_reason"`
}

// handoffPair starts B, the target, then A, which hands off to B at its
// SIGTERM, both with the same hand-off secret, pacing the partner at
// partnerLimits.
func handoffPair(t *testing.T, partner, partnerLimits string) (a, b *Hookpace) {
	secret := handoffSecret(t)
	b = Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": %s
shutdown: {handoff_secret_file: %s}
`, partner, partnerLimits, secret))
	a = Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": %s
shutdown: {timeout: 20s, handoff: "http://%s", handoff_secret_file: %s}
`, partner, partnerLimits, b.Proxy, secret))
	return a, b
}

func stopHandingOff(t *testing.T, a *Hookpace) {
	t.Helper()
	a.Signal(syscall.SIGTERM)
	if code := a.Wait(60 * time.Second); code != 0 {
		t.Fatalf("A's exit code %d, want 0\n%s", code, a.Log())
	}
}

// Pause travels: A has partner P paused by an operator with 20
// webhooks queued; at A's SIGTERM they go to B with the pause. B shows P
// paused (by the hand-off) and delivers nothing to it until `hookpace
// resume` there; then all 20 arrive, under A's ids. A plain client's
// forged pause, sent to B meanwhile, changes nothing.
func TestHandoffCarriesPause(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	a, b := handoffPair(t, rc.Host(), "{rate: 100/s, burst: 10}")
	P := rc.Host()
	if out, err := a.CLI("pause", P); err != nil {
		t.Fatalf("pause at A: %v %s", err, out)
	}
	ids := map[string]bool{}
	for i := range 20 {
		status, id := a.Post(a.Client(), fmt.Sprintf("%s/hook/%d", rc.URL, i), WebhookBody(i), nil)
		if status != http.StatusAccepted {
			t.Fatalf("webhook %d at A: %d", i, status)
		}
		ids[id] = true
	}
	var st hostState
	a.AdminJSON("/v1/hosts/"+P, &st)
	if !st.Paused || st.Queued != 20 {
		t.Fatalf("A: %+v, want P paused with 20 queued", st)
	}
	stopHandingOff(t, a)
	if !strings.Contains(a.Log(), "handoff: host state carried") {
		t.Errorf("A's log does not say P's pause was carried:\n%s", a.Log())
	}

	// A plain client of B's forges P's pause, without a claim and with
	// an unsigned one, for another partner: no pause, and the first is
	// delivered (which also shows that B delivers meanwhile).
	other := NewReceiver(t)
	forged := http.Header{"X-Hookpace-Handoff-Host": {"paused=me"}}
	if status, _, body := PostRaw(t, b.Client(), other.URL+"/forged", []byte(`{}`), forged); status != http.StatusAccepted {
		t.Fatalf("forged pause without a claim: %d %s", status, body)
	}
	forged.Set("X-Hookpace-Handoff-From", "pod-x/"+strings.Repeat("0", 15)+"1"+strings.Repeat("0", 15)+"1")
	if status, _, body := PostRaw(t, b.Client(), other.URL+"/forged", []byte(`{}`), forged); status != http.StatusForbidden {
		t.Fatalf("forged pause with an unsigned claim: %d %s, want 403", status, body)
	}
	other.WaitFor(t, 20*time.Second, "the webhook with a forged pause", func(as []Arrival) bool { return Delivered2xx(as) == 1 })
	if h := other.Arrivals()[0].Header.Get("X-Hookpace-Handoff-Host"); h != "" {
		t.Errorf("the forged pause reached the partner: %q", h)
	}
	var ost hostState
	b.AdminJSON("/v1/hosts/"+other.Host(), &ost)
	if ost.Paused {
		t.Errorf("B paused %s on a forged claim: %+v", other.Host(), ost)
	}

	var atB hostState
	b.AdminJSON("/v1/hosts/"+P, &atB)
	if !atB.Paused || !strings.Contains(atB.PausedWhy, "hand-off from") || atB.Queued != 20 {
		t.Fatalf("B: %+v, want P paused by the hand-off with 20 queued", atB)
	}
	if n := rc.Count(nil); n != 0 {
		t.Fatalf("the paused partner got %d webhooks from B", n)
	}
	if out, err := b.CLI("resume", P); err != nil {
		t.Fatalf("resume at B: %v %s", err, out)
	}
	rc.WaitFor(t, 30*time.Second, "the 20 webhooks once resumed", func(as []Arrival) bool { return Delivered2xx(as) >= 20 })
	for _, x := range rc.Arrivals() {
		if id := x.Header.Get("X-Hookpace-Id"); !ids[id] {
			t.Errorf("arrival %s with id %q, not one of A's", x.Path, id)
		}
		delete(ids, x.Header.Get("X-Hookpace-Id"))
	}
	if len(ids) != 0 {
		t.Errorf("%d of A's ids never arrived", len(ids))
	}
}

// A hold travels too: the partner answered A 429 with Retry-After: 30;
// after A's hand-off B holds P until the same time, and the partner gets
// nothing from B before then.
func TestHandoffCarriesHold(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	rc.Handle = func(w http.ResponseWriter, _ *http.Request, n int) {
		if n == 1 {
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
	a, b := handoffPair(t, rc.Host(), "{rate: 100/s, burst: 10, concurrency: 1}")
	P := rc.Host()
	for i := range 5 {
		if status, _ := a.Post(a.Client(), fmt.Sprintf("%s/hook/%d", rc.URL, i), WebhookBody(i), nil); status != http.StatusAccepted {
			t.Fatalf("webhook %d at A: %d", i, status)
		}
	}
	rc.WaitFor(t, 20*time.Second, "the 429", func(as []Arrival) bool { return len(as) == 1 && as[0].Status == 429 })
	var atA hostState
	Poll(t, 10*time.Second, "A holding P", func() bool {
		a.AdminJSON("/v1/hosts/"+P, &atA)
		return atA.HeldUntil != nil
	})
	if atA.HoldReason != "429 Retry-After" {
		t.Fatalf("A: %+v, want a 429 Retry-After hold", atA)
	}
	stopHandingOff(t, a)

	var atB hostState
	b.AdminJSON("/v1/hosts/"+P, &atB)
	if atB.HeldUntil == nil || !atB.HeldUntil.Equal(*atA.HeldUntil) || atB.Queued != 5 || atB.Paused {
		t.Fatalf("B: %+v, want P held until %v (as at A) with 5 queued", atB, atA.HeldUntil)
	}
	rc.WaitFor(t, 90*time.Second, "the 5 webhooks after the hold", func(as []Arrival) bool { return Delivered2xx(as) >= 5 })
	for _, x := range rc.Arrivals()[1:] {
		if x.At.Before(*atB.HeldUntil) {
			t.Errorf("%s arrived at %v, before the hold's end %v", x.Path, x.At, atB.HeldUntil)
		}
	}
}
