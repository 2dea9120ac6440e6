package deliver

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// signalQueue is a real spool that tells the test when a delivery's delete
// is settled or a burial has been submitted.
type signalQueue struct {
	*spool.Spool
	deleted chan *spool.Message
	buried  chan string
	paused  chan string // nil: not told
}

func (q *signalQueue) DeleteThen(ms []*spool.Message, done func(error)) {
	q.Spool.DeleteThen(ms, func(err error) {
		done(err)
		for _, m := range ms {
			q.deleted <- m
		}
	})
}

func (q *signalQueue) Bury(m *spool.Message, reason string, at time.Time) {
	q.Spool.Bury(m, reason, at)
	q.buried <- reason
}

func (q *signalQueue) SetPaused(host string, paused bool) error {
	err := q.Spool.SetPaused(host, paused)
	if q.paused != nil {
		q.paused <- host
	}
	return err
}

func journalSetup(t *testing.T, pol Policy) (*Dispatcher, *signalQueue) {
	t.Helper()
	s, err := openJournaled(spool.Options{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	q := &signalQueue{Spool: s, deleted: make(chan *spool.Message, 100), buried: make(chan string, 100)}
	d := New(Options{Reader: q, Store: q, Stats: q, Journal: journalOf(q.Spool), Policy: fixed(pol), Client: &http.Client{}, Logger: slog.New(slog.DiscardHandler)})
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Stop(context.Background())
		s.Close()
	})
	return d, q
}

func appendTo(t *testing.T, q *signalQueue, rawURL string) *spool.Message {
	t.Helper()
	u, _ := url.Parse(rawURL)
	m := &spool.Message{Host: u.Host, Method: "POST", URL: rawURL, Header: http.Header{}, Body: []byte(`{}`), Enqueued: time.Now()}
	if err := q.Append(context.Background(), m, 0); err != nil {
		t.Fatal(err)
	}
	return m
}

// The partner answers 500 with a JSON body, then 200: the journal has both
// attempts, with the answer's excerpt and no Set-Cookie value.
func TestJournalRecordsEachAttempt(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 1 {
			w.Header().Set("Set-Cookie", "session=secret")
			w.WriteHeader(500)
			w.Write([]byte(`{"error":"db pool exhausted"}`))
		}
	}))
	defer srv.Close()
	pol := policy(100, 10, 1)
	pol.BackoffInitial = 10 * time.Millisecond
	_, q := journalSetup(t, pol)
	m := appendTo(t, q, srv.URL+"/hook?token=abc")
	<-q.deleted
	// The 200's record was submitted before the delete: both are durable.
	v, err := journalOf(q.Spool).Lookup(spool.Ref{Seq: m.ID})
	if err != nil {
		t.Fatal(err)
	}
	if v.State != spool.OutcomeDelivered || v.Attempts[0].Status != 500 || v.Attempts[1].Status != 200 {
		t.Fatalf("state %s, attempts %+v", v.State, v.Attempts)
	}
	a := v.Attempts[0]
	if !strings.Contains(string(a.Body), "db pool exhausted") || a.Header.Get("Set-Cookie") != spool.Redacted || a.Error == "" {
		t.Fatalf("first attempt %+v", a)
	}
	if strings.Contains(v.Entry.URL, "abc") {
		t.Fatalf("URL kept its query value: %s", v.Entry.URL)
	}
}

// Webhooks held behind a pause past max_age die at the head of the queue,
// while the host is still paused, and none is sent.
func TestMaxAgeAtHeadBehindPause(t *testing.T) {
	sent := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { sent <- r.URL.Path }))
	defer srv.Close()
	pol := policy(100, 10, 1)
	pol.MaxAge = 300 * time.Millisecond
	d, q := journalSetup(t, pol)
	host := strings.TrimPrefix(srv.URL, "http://")
	if err := d.Pause(host); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		appendTo(t, q, srv.URL+"/old")
	}
	for range 3 {
		if r := <-q.buried; !strings.HasPrefix(r, "max_age") {
			t.Fatalf("reason %q", r)
		}
	}
	if _, err := d.Resume(host); err != nil {
		t.Fatal(err)
	}
	appendTo(t, q, srv.URL+"/new") // FIFO: anything left of the old ones would arrive first
	if p := <-sent; p != "/new" {
		t.Fatalf("sent %s after max_age", p)
	}
	dead, _, err := q.ListDead(spool.DeadFilter{}, 10)
	if err != nil || len(dead) != 3 {
		t.Fatalf("%d dead letters, %v", len(dead), err)
	}
}

// Purging a paused host's queue takes what the dispatcher holds in memory
// too: after the host resumes only a newer webhook arrives; another host
// on the same IP keeps its queue.
func TestPurgeIncludesMemory(t *testing.T) {
	sent := make(chan string, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { sent <- r.Host + r.URL.Path }))
	defer srv.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer other.Close()
	d, q := journalSetup(t, policy(1000, 100, 4))
	host := strings.TrimPrefix(srv.URL, "http://")
	otherHost := strings.TrimPrefix(other.URL, "http://")
	for _, h := range []string{host, otherHost} {
		if err := d.Pause(h); err != nil {
			t.Fatal(err)
		}
	}
	var ms []*spool.Message
	for range 50 {
		ms = append(ms, appendTo(t, q, srv.URL+"/old"))
		appendTo(t, q, other.URL+"/keep")
	}
	res, err := d.Purge(host, Selection{IDs: []spool.Ref{ms[0].Ref(), ms[1].Ref()}, By: "test"})
	if err != nil || res.Done != 2 {
		t.Fatalf("%+v %v", res, err)
	}
	res, err = d.Purge(host, Selection{By: "test"})
	if err != nil || res.Done != 48 || res.InFlight != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	if u := q.HostUsage(host); u.Messages != 0 {
		t.Fatalf("%d left", u.Messages)
	}
	if u := q.HostUsage(otherHost); u.Messages != 50 {
		t.Fatalf("other host: %d left", u.Messages)
	}
	if _, err := d.Resume(host); err != nil {
		t.Fatal(err)
	}
	appendTo(t, q, srv.URL+"/new")
	if p := <-sent; p != host+"/new" {
		t.Fatalf("sent %s after the purge", p)
	}
	if v, err := journalOf(q.Spool).Lookup(ms[7].Ref()); err != nil || v.State != spool.OutcomePurged || v.Entry.Reason != "purged by test" {
		t.Fatalf("%+v %v", v, err)
	}
}

// auto_pause_after pauses a host that has failed without a success that
// long, and keeps its queue.
func TestAutoPauseAfter(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(502) }))
	defer srv.Close()
	pol := policy(100, 10, 1)
	pol.BackoffInitial, pol.BackoffMax, pol.MaxAttempts = 10*time.Millisecond, 20*time.Millisecond, 1000
	pol.Limits.BreakerFailures = 1000
	pol.AutoPauseAfter = 200 * time.Millisecond
	d, q := journalSetup(t, pol)
	q.paused = make(chan string, 1)
	host := strings.TrimPrefix(srv.URL, "http://")
	appendTo(t, q, srv.URL+"/failing")
	if got := <-q.paused; got != host {
		t.Fatalf("paused %s", got)
	}
	if st, _ := d.Host(host); !st.Paused {
		t.Fatalf("status %+v", st)
	}
	if u := q.HostUsage(host); u.Messages != 1 {
		t.Fatalf("%d queued after the pause, want 1: the queue is kept", u.Messages)
	}
}
