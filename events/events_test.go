package events

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/spool"
)

const (
	testURL  = "https://ops.example/hookpace?token=s3cret"
	testHost = "ops.example"
)

var quiet = slog.New(slog.DiscardHandler)

func openSpool(t *testing.T, o spool.Options) *spool.Spool {
	t.Helper()
	o.Dir, o.Logger = t.TempDir(), quiet
	sp, err := spool.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	return sp
}

// queued reads what the spool holds for the events host, as payloads.
func queued(t *testing.T, sp *spool.Spool) ([]*spool.Message, []Payload) {
	t.Helper()
	ms, err := sp.Read(testHost, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	ps := make([]Payload, len(ms))
	for i, m := range ms {
		if err := json.Unmarshal(m.Body, &ps[i]); err != nil {
			t.Fatalf("%s: %v", m.Body, err)
		}
	}
	return ms, ps
}

func TestEventIsSpooledAsStandardWebhook(t *testing.T) {
	sp := openSpool(t, spool.Options{})
	e := New(Options{URL: testURL, Host: testHost, Spool: sp})
	defer e.Close()
	at := time.Date(2026, 11, 25, 16, 0, 0, 123e6, time.UTC)
	e.Emit(deliver.Event{Type: deliver.EventMessageDead, Host: "api.partner.example", At: at,
		Data: map[string]any{"id": "00ab", "url": "https://api.partner.example/hook?sig=abc&x=1", "ordering_key": "order-7"}})
	e.Emit(deliver.Event{Type: deliver.EventBreakerOpened, Host: testHost, At: at}) // about itself: not sent
	e.Flush()
	ms, ps := queued(t, sp)
	if len(ms) != 1 {
		t.Fatalf("%d events queued for %s, want 1", len(ms), testHost)
	}
	m, p := ms[0], ps[0]
	if m.URL != testURL || m.Method != "POST" || m.Header.Get("Content-Type") != "application/json" {
		t.Errorf("message %s %s %v", m.Method, m.URL, m.Header)
	}
	if p.Type != "message.dead" || !p.Timestamp.Equal(at) {
		t.Errorf("type %q timestamp %v", p.Type, p.Timestamp)
	}
	want := map[string]any{"id": "00ab", "host": "api.partner.example", "ordering_key": "order-7",
		"url": "https://api.partner.example/hook?sig=REDACTED&x=REDACTED"}
	for k, v := range want {
		if p.Data[k] != v {
			t.Errorf("data[%s] = %v, want %v", k, p.Data[k], v)
		}
	}
	if strings.Contains(string(m.Body), "abc") {
		t.Errorf("a secret in the event: %s", m.Body)
	}
	if a, d, s := e.Counts(); a != 1 || d != 0 || s != 1 {
		t.Errorf("counts appended %d dropped %d skipped %d, want 1 0 1", a, d, s)
	}
}

// held is the real spool, whose AppendEvent waits until release is
// closed: the emitter's goroutine is then busy, and Emit must not wait.
type held struct {
	*spool.Spool
	entered chan struct{}
	release chan struct{}
}

func (h *held) AppendEvent(m *spool.Message, max int64) error {
	h.entered <- struct{}{}
	<-h.release
	return h.Spool.AppendEvent(m, max)
}

func TestEmitNeverBlocks(t *testing.T) {
	sp := &held{Spool: openSpool(t, spool.Options{}), entered: make(chan struct{}, 10), release: make(chan struct{})}
	e := New(Options{URL: testURL, Host: testHost, Spool: sp, Buffer: 2, Logger: quiet})
	e.Emit(deliver.Event{Type: "a", Host: "h1"})
	<-sp.entered // the goroutine holds the first one
	for _, typ := range []string{"b", "c", "d", "e"} {
		e.Emit(deliver.Event{Type: typ, Host: "h1"}) // two fit in the buffer, two are dropped
	}
	close(sp.release)
	e.Close()
	if a, d, _ := e.Counts(); a != 3 || d != 2 {
		t.Errorf("appended %d dropped %d, want 3 and 2", a, d)
	}
	if ms, _ := queued(t, sp.Spool); len(ms) != 3 {
		t.Errorf("%d queued, want 3", len(ms))
	}
	e.Emit(deliver.Event{Type: "after close", Host: "h1"})
	if _, d, _ := e.Counts(); d != 3 {
		t.Errorf("an event after Close: dropped %d, want 3", d)
	}
}

// An event that says the spool refuses webhooks is stored all the same,
// up to MaxQueued for the events host.
func TestEventsPastHighWater(t *testing.T) {
	sp := openSpool(t, spool.Options{MaxMessages: 10, HighWater: 0.5, LowWater: 0.2})
	ctx := context.Background()
	var full *spool.FullError
	for i := 0; ; i++ {
		err := sp.Append(ctx, &spool.Message{Host: "partner.example", Method: "POST", URL: "http://partner.example/", Enqueued: time.Now()}, 0)
		if errors.As(err, &full) {
			break
		} else if err != nil || i > 10 {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	e := New(Options{URL: testURL, Host: testHost, Spool: sp, MaxQueued: 3, Logger: quiet})
	defer e.Close()
	e.Check(time.Now(), sp.Usage(), nil)
	e.Flush() // the events of a round are appended concurrently, in any order
	for range 4 {
		e.Emit(deliver.Event{Type: "x", Host: "partner.example"})
	}
	e.Flush()
	ms, ps := queued(t, sp)
	if len(ms) != 3 || ps[0].Type != SpoolHighWater {
		t.Fatalf("queued %d events, first %+v; want 3, the first spool.high_water", len(ms), ps)
	}
	if n, _ := ps[0].Data["messages"].(float64); ps[0].Data["high_water"] != 0.5 || n < 5 {
		t.Errorf("high-water data %v", ps[0].Data)
	}
	if a, d, _ := e.Counts(); a != 3 || d != 2 {
		t.Errorf("appended %d dropped %d, want 3 and 2 (MaxQueued)", a, d)
	}
}

func TestCheck(t *testing.T) {
	sp := openSpool(t, spool.Options{})
	e := New(Options{URL: testURL, Host: testHost, Spool: sp, HeldAfter: time.Minute})
	defer e.Close()
	t0 := time.Date(2026, 11, 25, 16, 0, 0, 0, time.UTC)
	until := t0.Add(time.Hour)
	heldHost := func(name string) deliver.HostStatus {
		return deliver.HostStatus{Host: name, HeldUntil: &until, HoldReason: "429", Queued: 7}
	}
	high := spool.Usage{Refusal: spool.RefusalHighWater}
	steps := []struct {
		at    time.Duration
		u     spool.Usage
		hosts []deliver.HostStatus
		want  []string // types emitted, in order
	}{
		{0, spool.Usage{}, []deliver.HostStatus{heldHost("a"), heldHost(testHost), {Host: "b"}}, nil},
		{30 * time.Second, high, []deliver.HostStatus{heldHost("a")}, []string{SpoolHighWater}},
		{time.Minute, high, []deliver.HostStatus{heldHost("a"), heldHost(testHost)}, []string{HostHeld}},
		{2 * time.Minute, high, []deliver.HostStatus{heldHost("a")}, nil}, // once a hold
		{3 * time.Minute, spool.Usage{}, []deliver.HostStatus{{Host: "a"}}, []string{SpoolLowWater}},
		{4 * time.Minute, spool.Usage{}, []deliver.HostStatus{heldHost("a")}, nil}, // a new hold
		{5*time.Minute - time.Second, spool.Usage{}, []deliver.HostStatus{heldHost("a")}, nil},
		{5 * time.Minute, spool.Usage{}, []deliver.HostStatus{heldHost("a")}, []string{HostHeld}},
	}
	seen := 0
	for i, s := range steps {
		e.Check(t0.Add(s.at), s.u, s.hosts)
		e.Flush()
		_, ps := queued(t, sp)
		var got []string
		for _, p := range ps[seen:] {
			got = append(got, p.Type)
			if p.Type == HostHeld && (p.Data["host"] != "a" || p.Data["hold_reason"] != "429" || p.Data["queued"] != float64(7)) {
				t.Errorf("step %d: host.held data %v", i, p.Data)
			}
		}
		seen = len(ps)
		if strings.Join(got, ",") != strings.Join(s.want, ",") {
			t.Errorf("step %d (+%v): emitted %v, want %v", i, s.at, got, s.want)
		}
	}
}
