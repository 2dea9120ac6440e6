package deliver

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// eventsSetup is journalSetup with Options.Events sending to the channel
// it returns; the callback fails the test if it would have to wait.
func eventsSetup(t *testing.T, pol Policy) (*Dispatcher, *signalQueue, chan Event) {
	t.Helper()
	s, err := openJournaled(spool.Options{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	q := &signalQueue{Spool: s, deleted: make(chan *spool.Message, 100), buried: make(chan string, 100)}
	evs := make(chan Event, 100)
	emit := func(ev Event) {
		select {
		case evs <- ev:
		default:
			t.Error("Options.Events would block")
		}
	}
	d := New(Options{Reader: q, Store: q, Stats: q, Journal: journalOf(q.Spool), Policy: fixed(pol), Client: &http.Client{},
		Logger: slog.New(slog.DiscardHandler), Events: emit})
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Stop(context.Background())
		s.Close()
	})
	return d, q, evs
}

// next returns the next event of type typ, passing over others.
func next(t *testing.T, evs chan Event, typ string) Event {
	t.Helper()
	for ev := range evs {
		if ev.Type == typ {
			return ev
		}
	}
	t.Fatalf("no %s", typ)
	return Event{}
}

// A webhook that uses up max_attempts, the breaker opening on its
// failures and closing on the next success: each is an event.
func TestEventsDeadAndBreaker(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ok" {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	pol := policy(1000, 100, 1)
	pol.BackoffInitial, pol.BackoffMax, pol.MaxAttempts = time.Millisecond, time.Millisecond, 2
	pol.Limits.BreakerFailures, pol.Limits.BreakerCooldown = 1, 10*time.Millisecond
	_, q, evs := eventsSetup(t, pol)
	host := strings.TrimPrefix(srv.URL, "http://")
	m := appendTo(t, q, srv.URL+"/fail?token=s3cret")

	opened := next(t, evs, EventBreakerOpened)
	if opened.Host != host || opened.Data["reason"] != "status 500" || opened.Data["probe_at"] == nil {
		t.Errorf("breaker.opened %+v", opened)
	}
	dead := next(t, evs, EventMessageDead)
	want := map[string]any{"id": m.Ref().String(), "method": "POST", "url": srv.URL + "/fail?token=REDACTED",
		"attempts": 2, "last_status": 500, "reason": "max_attempts 2 reached (last: status 500)"}
	for k, v := range want {
		if dead.Data[k] != v {
			t.Errorf("message.dead data[%s] = %v, want %v", k, dead.Data[k], v)
		}
	}
	if _, ok := dead.Data["ordering_key"]; ok || dead.Host != host || dead.At.IsZero() {
		t.Errorf("message.dead %+v", dead)
	}
	appendTo(t, q, srv.URL+"/ok")
	if closed := next(t, evs, EventBreakerClosed); closed.Host != host {
		t.Errorf("breaker.closed %+v", closed)
	}
}

// A webhook past max_age at the head of a paused host's queue is a dead
// letter, and an event.
func TestEventsMaxAge(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	pol := policy(1000, 100, 1)
	pol.MaxAge = 20 * time.Millisecond
	d, q, evs := eventsSetup(t, pol)
	host := strings.TrimPrefix(srv.URL, "http://")
	if err := d.Pause(host); err != nil {
		t.Fatal(err)
	}
	m := appendTo(t, q, srv.URL+"/late")
	dead := next(t, evs, EventMessageDead)
	if dead.Data["id"] != m.Ref().String() || !strings.HasPrefix(dead.Data["reason"].(string), "max_age 20ms exceeded at the head") {
		t.Errorf("message.dead %+v", dead)
	}
}

// auto_pause_after: an event, and the status says why the host is
// paused, until it is resumed; an operator's pause says so.
func TestEventsAutoPause(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(502) }))
	defer srv.Close()
	pol := policy(100, 10, 1)
	pol.BackoffInitial, pol.BackoffMax, pol.MaxAttempts = 10*time.Millisecond, 20*time.Millisecond, 1000
	pol.Limits.BreakerFailures = 1000
	pol.AutoPauseAfter = 100 * time.Millisecond
	d, q, evs := eventsSetup(t, pol)
	host := strings.TrimPrefix(srv.URL, "http://")
	appendTo(t, q, srv.URL+"/failing")
	ev := next(t, evs, EventHostPaused)
	why, _ := ev.Data["reason"].(string)
	if ev.Host != host || !strings.HasPrefix(why, "auto_pause_after 100ms: failing without a single success since") ||
		ev.Data["last_error"] != "status 502" || ev.Data["auto_pause_after"] != "100ms" {
		t.Fatalf("host.paused %+v", ev)
	}
	if st, _ := d.Host(host); !st.Paused || st.PausedWhy != why {
		t.Fatalf("status paused %v, why %q; want %q", st.Paused, st.PausedWhy, why)
	}
	if _, err := d.Purge(host, Selection{By: "test"}); err != nil { // nothing left to fail after the resume
		t.Fatal(err)
	}
	if _, err := d.Resume(host); err != nil {
		t.Fatal(err)
	}
	if st, _ := d.Host(host); st.Paused || st.PausedWhy != "" {
		t.Fatalf("resumed: paused %v, why %q", st.Paused, st.PausedWhy)
	}
	if err := d.Pause(host); err != nil {
		t.Fatal(err)
	}
	if st, _ := d.Host(host); st.PausedWhy != PausedByOperator {
		t.Fatalf("operator's pause: why %q", st.PausedWhy)
	}
}
