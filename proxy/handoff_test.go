package proxy

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/handoff"
	"github.com/hookpace/hookpace/pacer"
	"github.com/hookpace/hookpace/spool"
)

var _ HostStates = (*deliver.Dispatcher)(nil)

// stateProxy is a proxy on a real spool whose Pacing and HostStates are a
// real dispatcher (not started: nothing is delivered), with the hand-off
// secret secret.
func stateProxy(t *testing.T, secret []byte) (*Proxy, *spool.Spool, *deliver.Dispatcher, *bytes.Buffer) {
	t.Helper()
	var log bytes.Buffer
	p, sp := laneProxy(t, HostPolicy{}, nil, &log)
	d := deliver.New(deliver.Options{Reader: sp, Store: sp, Stats: sp, Journal: journalOf(sp), Logger: slog.New(slog.DiscardHandler), Policy: func(string) *deliver.Policy {
		return &deliver.Policy{Limits: pacer.Limits{Rate: 10, Burst: 1, Concurrency: 1,
			HoldSchedule: []time.Duration{time.Second}, MaxRetryAfter: time.Minute}}
	}})
	p.opts.Pacing, p.opts.HostStates = d, d
	pol := *p.policy.Load()
	pol.HandoffSecret = secret
	p.SetPolicy(pol)
	return p, sp, d, &log
}

var proxySecret = []byte("0123456789abcdef0123456789abcdef")

// handedOff is the headers of a hand-off of post's body to laneHost with
// the given claim, signed with secret, carrying state signed with
// stateSecret (nil: unsigned; state "": none).
func handedOff(claim string, secret []byte, state string, stateSecret []byte) http.Header {
	h := http.Header{handoff.Header: {claim}}
	h.Set(handoff.SignatureHeader, handoff.Sign(secret, claim, http.MethodPost, laneHost, []byte(`{"n":1}`)))
	if state != "" {
		h.Set(handoff.HostHeader, state)
	}
	if stateSecret != nil {
		h.Set(handoff.HostSignatureHeader, handoff.SignHost(stateSecret, claim, laneHost, state))
	}
	return h
}

// A signed hand-off's pause is recorded durably, as the hand-off's, and
// its hold applied until its end, before the webhook is stored; the state
// headers are not stored.
func TestHandoffAppliesHostState(t *testing.T) {
	p, sp, d, _ := stateProxy(t, proxySecret)
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	state := handoff.HostState{PausedBy: deliver.PausedByOperator, HeldUntil: until, HoldReason: "429 Retry-After"}.Encode()
	claim := "pod-a/00000000000000070000000000000001"
	if w := post(p, "/hook", handedOff(claim, proxySecret, state, proxySecret)); w.Code != http.StatusAccepted {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	hs, ok := d.Host(laneHost)
	if !ok || !hs.Paused || hs.HeldUntil == nil || !hs.HeldUntil.Equal(until) {
		t.Fatalf("host after the hand-off: %+v", hs)
	}
	if want := "hand-off from pod-a: " + deliver.PausedByOperator; hs.PausedWhy != want {
		t.Errorf("paused_why %q, want %q", hs.PausedWhy, want)
	}
	if paused, err := sp.Paused(); err != nil || len(paused) != 1 || paused[0] != laneHost {
		t.Errorf("pauses recorded in the spool: %v %v", paused, err)
	}
	ms := queued(t, sp)
	if len(ms) != 1 {
		t.Fatalf("%d stored", len(ms))
	}
	for _, k := range []string{handoff.HostHeader, handoff.HostSignatureHeader} {
		if _, ok := ms[0].Header[k]; ok {
			t.Errorf("%s stored", k)
		}
	}
	// A resume here is not undone by a later webhook of the hand-off:
	// only the first carries the state.
	if _, err := d.Resume(laneHost); err != nil {
		t.Fatal(err)
	}
	if w := post(p, "/hook", handedOff("pod-a/00000000000000070000000000000002", proxySecret, "", nil)); w.Code != http.StatusAccepted {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if hs, _ := d.Host(laneHost); hs.Paused {
		t.Errorf("paused again")
	}
}

// A state that a client forged changes nothing: without a claim it is
// dropped, with a claim it must be signed (403), and a hookpace without
// the secret applies none (and says so once).
func TestHandoffForgedHostState(t *testing.T) {
	paused := handoff.HostState{PausedBy: "me"}.Encode()
	other := []byte("another secret, 32 bytes at least!!")
	for _, c := range []struct {
		name   string
		secret []byte // the receiving hookpace's
		h      http.Header
		status int
	}{
		{"no claim", proxySecret, http.Header{handoff.HostHeader: {paused}}, http.StatusAccepted},
		{"state unsigned", proxySecret, handedOff("pod-a/00000000000000070000000000000001", proxySecret, paused, nil), http.StatusForbidden},
		{"state signed with another secret", proxySecret,
			handedOff("pod-a/00000000000000070000000000000001", proxySecret, paused, other), http.StatusForbidden},
		{"state of another claim", proxySecret, func() http.Header {
			h := handedOff("pod-a/00000000000000070000000000000001", proxySecret, paused, nil)
			h.Set(handoff.HostSignatureHeader, handoff.SignHost(proxySecret, "pod-a/00000000000000070000000000000002", laneHost, paused))
			return h
		}(), http.StatusForbidden},
		{"no secret here", nil, handedOff("pod-a/00000000000000070000000000000001", proxySecret, paused, proxySecret), http.StatusAccepted},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, sp, d, log := stateProxy(t, c.secret)
			if w := post(p, "/hook", c.h); w.Code != c.status {
				t.Fatalf("%d %s, want %d", w.Code, w.Body, c.status)
			}
			if hs, ok := d.Host(laneHost); ok && hs.Paused {
				t.Errorf("paused: %+v", hs)
			}
			if rec, _ := sp.Paused(); len(rec) != 0 {
				t.Errorf("pause recorded: %v", rec)
			}
			for _, m := range queued(t, sp) {
				if _, ok := m.Header[handoff.HostHeader]; ok {
					t.Errorf("%s stored", handoff.HostHeader)
				}
			}
			if c.secret == nil && !strings.Contains(log.String(), "pauses and holds") {
				t.Errorf("not logged that the state is ignored: %s", log)
			}
		})
	}
}

// A state with a hookpace that cannot apply it (no dispatcher) keeps the
// webhook with the other hookpace.
func TestHandoffHostStateUnapplied(t *testing.T) {
	p, sp := laneProxy(t, HostPolicy{Connect: ConnectTunnel}, nil, nil)
	pol := *p.policy.Load()
	pol.HandoffSecret = proxySecret
	p.SetPolicy(pol)
	state := handoff.HostState{PausedBy: "x"}.Encode()
	claim := "pod-a/00000000000000070000000000000001"
	if w := post(p, "/hook", handedOff(claim, proxySecret, state, proxySecret)); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if ms := queued(t, sp); len(ms) != 0 {
		t.Errorf("%d stored", len(ms))
	}
}
