package handoff

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/spool"
)

var stateSecret = []byte("0123456789abcdef0123456789abcdef")

func TestHostStateEncodes(t *testing.T) {
	until := time.Date(2026, 11, 25, 16, 30, 0, 123e6, time.UTC)
	for _, st := range []HostState{
		{PausedBy: "paused by an operator"},
		{HeldUntil: until, HoldReason: "429 Retry-After"},
		{PausedBy: "auto_pause_after: 5xx for 10m & more", HeldUntil: until, HoldReason: "quota"},
	} {
		got, err := ParseHostState(st.Encode())
		if err != nil || got.PausedBy != st.PausedBy || !got.HeldUntil.Equal(st.HeldUntil) || got.HoldReason != st.HoldReason {
			t.Errorf("%+v came back as %+v, %v", st, got, err)
		}
	}
	for _, bad := range []string{"", "x=1", "held_until=tomorrow", "paused=%zz", strings.Repeat("paused=x&", 200)} {
		if st, err := ParseHostState(bad); err == nil {
			t.Errorf("ParseHostState(%q) = %+v, want an error", bad, st)
		}
	}
}

func TestHostStateSignature(t *testing.T) {
	claim, host, state := "pod-a/00000000000000070000000000000001", "p.example", HostState{PausedBy: "x"}.Encode()
	sig := SignHost(stateSecret, claim, host, state)
	if err := VerifyHost(stateSecret, sig, claim, host, state); err != nil {
		t.Fatal(err)
	}
	other := []byte("another secret, 32 bytes at least!!")
	for name, c := range map[string][5]string{
		"unsigned":      {string(stateSecret), "", claim, host, state},
		"other secret":  {string(other), sig, claim, host, state},
		"other host":    {string(stateSecret), sig, claim, "q.example", state},
		"other claim":   {string(stateSecret), sig, "pod-a/00000000000000070000000000000002", host, state},
		"other state":   {string(stateSecret), sig, claim, host, HostState{PausedBy: "y"}.Encode()},
		"webhook's sig": {string(stateSecret), Sign(stateSecret, claim, "POST", host, []byte(state)), claim, host, state},
	} {
		if err := VerifyHost([]byte(c[0]), c[1], c[2], c[3], c[4]); err == nil {
			t.Errorf("%s: verified", name)
		}
	}
}

// stateTarget records, in arrival order, each request's host and the host
// state it carried (checked with stateSecret), and answers 202, or 503
// to a request carrying a state when refuse says so.
func stateTarget(t *testing.T, refuse bool) (*target, func() (hosts []string, states map[int]HostState)) {
	tg := newTarget(t, nil)
	tg.answer = func(w http.ResponseWriter, n int64) {
		tg.mu.Lock()
		g := tg.got[n-1]
		tg.mu.Unlock()
		if refuse && g.header.Get(HostHeader) != "" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		accept(w, n)
	}
	return tg, func() ([]string, map[int]HostState) {
		tg.mu.Lock()
		defer tg.mu.Unlock()
		var hosts []string
		states := map[int]HostState{}
		for i, g := range tg.got {
			hosts = append(hosts, g.host)
			v := g.header.Get(HostHeader)
			if v == "" {
				continue
			}
			if err := VerifyHost(stateSecret, g.header.Get(HostSignatureHeader), g.lineage, g.host, v); err != nil {
				t.Errorf("request %d: %v", i, err)
			}
			st, err := ParseHostState(v)
			if err != nil {
				t.Errorf("request %d: %v", i, err)
			}
			states[i] = st
		}
		return hosts, states
	}
}

// A paused and held host's state goes on its first webhook, alone: the
// target has it before any other webhook of the host, and only once.
func TestHostStateGoesFirst(t *testing.T) {
	tg, got := stateTarget(t, false)
	sp := queued(t, 60)
	until := time.Now().Add(time.Hour).UTC()
	st := HostState{PausedBy: "paused by an operator", HeldUntil: until, HoldReason: "429 Retry-After"}
	res, err := Run(context.Background(), Options{Target: "http://" + tg.Listener.Addr().String(), From: "pod-a", Secret: stateSecret,
		Hosts: map[string]HostState{"h1.example": st}, Queue: sp, Logger: quiet()})
	if err != nil || res.HandedOff != 60 || res.Left != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	hosts, states := got()
	first := -1
	for i, h := range hosts {
		if h == "h1.example" {
			first = i
			break
		}
	}
	if len(states) != 1 {
		t.Fatalf("%d requests carried a host state, want 1: %v", len(states), states)
	}
	s, ok := states[first]
	if !ok {
		t.Fatalf("h1.example's first request (%d) carried no state; states %v", first, states)
	}
	if s.PausedBy != st.PausedBy || !s.HeldUntil.Equal(until) || s.HoldReason != st.HoldReason {
		t.Errorf("state %+v, want %+v", s, st)
	}
}

// When the webhook carrying the state is kept, so are the host's others;
// the other hosts go.
func TestHostStateKeptKeepsHost(t *testing.T) {
	tg, got := stateTarget(t, true)
	sp := queued(t, 30)
	res, err := Run(context.Background(), Options{Target: "http://" + tg.Listener.Addr().String(), From: "pod-a", Secret: stateSecret,
		Hosts: map[string]HostState{"h2.example": {PausedBy: "paused by an operator"}}, Queue: sp, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if res.HandedOff != 20 || res.Left != 10 || res.Kept["status_503"] != 1 || res.Kept[KeptBehindState] != 9 {
		t.Fatalf("result %+v", res)
	}
	if n := sp.HostUsage("h2.example").Messages; n != 10 {
		t.Errorf("h2.example: %d left here, want 10", n)
	}
	hosts, _ := got()
	n := 0
	for _, h := range hosts {
		if h == "h2.example" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the target got %d of h2.example's webhooks, want only the one carrying its state", n)
	}
}

// Without a secret no state is sent (the target could not trust it), and
// a state header stored with a webhook is never sent on.
func TestHostStateOnlySigned(t *testing.T) {
	tg, _ := stateTarget(t, false)
	sp := queued(t, 3)
	forged := &spool.Message{Host: "h0.example", Method: "POST", URL: "http://h0.example/x",
		Header: http.Header{HostHeader: {"paused=me"}, HostSignatureHeader: {"v1=00"}}, Body: []byte("{}"), Enqueued: time.Now()}
	if err := sp.Append(context.Background(), forged, 0); err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Options{Target: "http://" + tg.Listener.Addr().String(), From: "pod-a",
		Hosts: map[string]HostState{"h1.example": {PausedBy: "paused by an operator"}}, Queue: sp, Logger: quiet()})
	if err != nil || res.HandedOff != 4 {
		t.Fatalf("%+v %v", res, err)
	}
	tg.mu.Lock()
	defer tg.mu.Unlock()
	for _, g := range tg.got {
		if g.header.Get(HostHeader) != "" || g.header.Get(HostSignatureHeader) != "" {
			t.Errorf("sent a host state to %s: %v", g.host, g.header)
		}
	}
}
