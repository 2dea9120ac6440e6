package fleet

import (
	"slices"
	"testing"
	"time"

	"github.com/hookpace/hookpace/pacer"
)

// The client's side of the protocol, without Redis: what each ask
// carries and what each answer means.

var fast = pacer.Limits{Rate: 100000, Burst: 200, Concurrency: 3} // Reserve 50 for one replica

func need(due int) Need {
	return Need{Host: "partner.example", Limits: fast, Live: 1, Shared: true, Due: due}
}

// An answer that says the host is held (or paused, or its breaker open)
// gives the kept leases back and ends the tokens in hand, even those still
// within their time; an ordinary answer with tokens keeps keeping.
func TestHoldEndsKeeping(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, g := range []Grant{{HeldFor: time.Second, Breaker: "closed"}, {Paused: true}, {Breaker: "open"}, {Breaker: "half-open"}} {
		h := &Host{carry: []string{"a:1:1", "a:1:2"}, tokens: 5, tokensBy: now.Add(time.Hour), asking: true}
		h.Answered(now, Request{Ahead: 5}, &g, false, time.Hour)
		if len(h.carry) != 0 || len(h.done) != 2 || h.done[0].Keep || h.canCarry(now) {
			t.Fatalf("answer %+v: carry %v, done %+v, can carry %v: want both leases given back, no tokens",
				g, h.carry, h.done, h.canCarry(now))
		}
		if back, expired := h.expireTokens(now); back != 5 || !expired {
			t.Fatalf("answer %+v: next ask gives back %d (expired %v), want 5", g, back, expired)
		}
	}
	h := &Host{carry: []string{"a:1:1"}, asking: true}
	h.Answered(now, Request{Ahead: 2}, &Grant{Tokens: 2, Breaker: "closed"}, false, time.Hour)
	if len(h.carry) != 1 || !h.canCarry(now) {
		t.Fatalf("ordinary answer: carry %v, tokens %d", h.carry, h.tokens)
	}
}

// One host's round: an ask for what is due, with tokens ahead for a
// backlog; the leases granted are used, a success's lease is kept and
// goes again on a token taken ahead; what is left goes back with the next
// ask.
func TestHostRound(t *testing.T) {
	now := time.Unix(1000, 0)
	h := &Host{}
	req, ok := h.Ask(now, need(10))
	// Ahead: no more than leases may come free for them (3 to come).
	if !ok || req.Want != 3 || req.Ahead != 3 || len(req.Releases) != 0 {
		t.Fatalf("first ask: %+v %v, want 3 leases and 3 ahead", req, ok)
	}
	if _, again := h.Ask(now, need(10)); again {
		t.Fatal("a second ask while one is under way")
	}
	h.Answered(now, req, &Grant{Leases: []string{"l1", "l2", "l3"}, Tokens: 3, Breaker: "closed", Rate: 100000}, false, TokensFor)
	var used []string
	for {
		ok, carry, _ := h.Ready(now)
		if !ok {
			break
		}
		used = append(used, h.Use(carry))
	}
	if !slices.Equal(used, []string{"l1", "l2", "l3"}) {
		t.Fatalf("used %v", used)
	}
	r := pacer.Result{Outcome: pacer.Success, SentAt: now}
	if !h.Keep(r, true, fast, 1, func() int { return 7 }) {
		t.Fatal("a success's lease with 7 more due is not kept")
	}
	h.Released(now, "l1", r, true)
	ok, carry, _ := h.Ready(now)
	if !ok || !carry || h.Use(carry) != "l1" || h.tokens != 2 {
		t.Fatalf("the kept lease: ready %v carry %v tokens %d", ok, carry, h.tokens)
	}
	h.Released(now, "l2", pacer.Result{Outcome: pacer.Failure, SentAt: now}, false)
	// Later than the tokens' time: the next ask gives them back, and the
	// finished attempt is reported.
	later := now.Add(TokensFor)
	req, ok = h.Ask(later, need(0))
	if !ok || req.GiveBack != 2 || req.Want != 0 || req.Ahead != 0 || len(req.Releases) != 2 ||
		!req.Releases[0].Keep || req.Releases[1].Lease != "l2" {
		t.Fatalf("second ask: %+v %v", req, ok)
	}
}

// Leases granted and not used go back after the pump; a quota hold and
// the attempts' releases go with the next ask; Flush hands back all that
// is held at shutdown.
func TestHostGivesBack(t *testing.T) {
	now := time.Unix(1000, 0)
	h := &Host{asking: true}
	h.Answered(now, Request{Want: 2}, &Grant{Leases: []string{"l1", "l2"}, Breaker: "closed"}, false, TokensFor)
	lease := h.Use(false)
	if !h.Pumped(now, func() bool { return true }) || len(h.grants) != 0 {
		t.Fatalf("unused grant not given back: %+v", h)
	}
	h.QuotaHeld(time.Second)
	h.Released(now, lease, pacer.Result{Outcome: pacer.Success, SentAt: now}, false)
	rel, back := h.Flush()
	if len(rel) != 3 || rel[0].Lease != "l2" || !rel[1].HasRetry || rel[2].Lease != "l1" || back != 0 || h.Busy() {
		t.Fatalf("flush: %+v, back %d, busy %v", rel, back, h.Busy())
	}
	// An answer while the limiter is still degraded grants nothing.
	h.asking = true
	h.Answered(now, Request{Want: 1}, &Grant{Leases: []string{"l3"}}, true, TokensFor)
	if ok, _, _ := h.Ready(now); ok {
		t.Fatal("a lease used while degraded")
	}
}

// With concurrency: auto, a replica asks for leases within its adaptive
// limit (Need.Slots), not the host's whole concurrency, which Redis still
// counts.
func TestAskWithinSlots(t *testing.T) {
	var h Host
	n := need(10)
	n.Slots = 2
	req, ok := h.Ask(time.Unix(0, 0), n)
	if !ok || req.Want != 2 || req.Limits.Concurrency != n.Limits.Concurrency {
		t.Fatalf("ask %+v (%v), want 2 leases under concurrency %d", req, ok, n.Limits.Concurrency)
	}
}
