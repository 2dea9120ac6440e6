package deliver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookpace/hookpace/pacer"
	"github.com/hookpace/hookpace/spool"
)

// memQueue is an in-memory queue for unit tests of the dispatcher: all
// four of its dependencies on the durable queue. The real one, Badger, is
// exercised in spool's tests and in e2e.
type memQueue struct {
	mu sync.Mutex
	// The coalescing handshake: replace holds, by id, the content Begin
	// gives a message (a newer webhook with its coalesce key arrived while
	// it was queued); begun are the attempts begun and not ended, and
	// dropLater those to drop when they end.
	replace   map[uint64]*spool.Message
	begun     map[uint64]int
	dropLater map[uint64]bool
	attempts  map[uint64][]spool.Attempt // the journal
	bodies    map[uint64]*spool.Message  // the journal's delivered requests

	seq    uint64
	queued map[string]map[uint64]*spool.Message
	dead   []*spool.Message
	why    []string
	notify func([]*spool.Message)
	paused map[string]bool
	// pauseErr, if set, fails SetPaused.
	pauseErr error

	updates int

	deleteTakes time.Duration // how long a delete takes to become durable
	// deleteHeld, if set, holds every delete until it is closed (the
	// spool's deletes wait for space on a disk another process filled).
	deleteHeld chan struct{}
	deleted    int
}

func newMemQueue() *memQueue {
	return &memQueue{queued: map[string]map[uint64]*spool.Message{}, paused: map[string]bool{},
		begun: map[uint64]int{}, dropLater: map[uint64]bool{}, attempts: map[uint64][]spool.Attempt{},
		bodies: map[uint64]*spool.Message{}}
}

var (
	_ QueueReader = (*memQueue)(nil)
	_ QueueStore  = (*memQueue)(nil)
	_ QueueStats  = (*memQueue)(nil)
	_ Journal     = (*memQueue)(nil)
)

func (q *memQueue) Begin(m *spool.Message) int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.begun[m.ID]++
	r := q.replace[m.ID]
	if r == nil {
		return 0
	}
	grew := int64(len(r.Body) - len(m.Body))
	m.Header, m.Body = r.Header, r.Body
	return grew
}

func (q *memQueue) End(m *spool.Message) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.begun[m.ID]--; q.begun[m.ID] <= 0 {
		delete(q.begun, m.ID)
	}
	if q.dropLater[m.ID] {
		delete(q.dropLater, m.ID)
		delete(q.queued[m.Host], m.ID)
	}
}

// inFlight is how many attempts were begun and not ended.
func (q *memQueue) inFlight() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, c := range q.begun {
		n += c
	}
	return n
}

func (q *memQueue) HostCoalesced(string) int64 { return 0 }
func (q *memQueue) HostDeduped(string) int64   { return 0 }

func (q *memQueue) RecordAttempt(m *spool.Message, a spool.Attempt) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.attempts[m.ID] = append(q.attempts[m.ID], a)
}

func (q *memQueue) JournalResponseBody() int { return 1024 }

func (q *memQueue) JournalBody(m *spool.Message) {
	q.mu.Lock()
	defer q.mu.Unlock()
	c := *m
	q.bodies[m.ID] = &c
}

func (q *memQueue) Drop(ms []*spool.Message, by string) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, m := range ms {
		if q.queued[m.Host][m.ID] != nil {
			delete(q.queued[m.Host], m.ID)
			n++
		}
	}
	return n, nil
}

func (q *memQueue) DropLater(m *spool.Message, by string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.begun[m.ID] > 0 {
		q.dropLater[m.ID] = true
		return
	}
	delete(q.queued[m.Host], m.ID)
}

func (q *memQueue) BuryAll(ms []*spool.Message, reason string, at time.Time) (int, error) {
	for _, m := range ms {
		q.Bury(m, reason, at)
	}
	return len(ms), nil
}

func (q *memQueue) add(host string, n int) {
	q.mu.Lock()
	var msgs []*spool.Message
	for i := range n {
		q.seq++
		m := &spool.Message{ID: q.seq, Host: host, Method: "POST", URL: "http://" + host + "/hook/" + fmt.Sprint(i),
			Header: http.Header{"X-N": {fmt.Sprint(i)}}, Body: []byte(fmt.Sprintf("body-%d", i)), Enqueued: time.Now()}
		if q.queued[host] == nil {
			q.queued[host] = map[uint64]*spool.Message{}
		}
		c := *m
		q.queued[host][m.ID] = &c
		msgs = append(msgs, m)
	}
	notify := q.notify
	q.mu.Unlock()
	if notify != nil {
		notify(msgs)
	}
}

func (q *memQueue) Notify(fn func([]*spool.Message)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.notify = fn
}
func (q *memQueue) SetPaused(host string, paused bool) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.pauseErr != nil {
		return q.pauseErr
	}
	if paused {
		q.paused[host] = true
	} else {
		delete(q.paused, host)
	}
	return nil
}
func (q *memQueue) Paused() ([]string, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for h := range q.paused {
		out = append(out, h)
	}
	sort.Strings(out)
	return out, nil
}

func (q *memQueue) Read(host string, after uint64, max int) ([]*spool.Message, error) {
	return q.ReadLane(host, spool.Lane{}, after, max)
}
func (q *memQueue) ReadLane(host string, l spool.Lane, after uint64, max int) ([]*spool.Message, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var ids []uint64
	for id, m := range q.queued[host] {
		if id > after && m.Lane() == l {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var out []*spool.Message
	for _, id := range ids[:min(len(ids), max)] {
		c := *q.queued[host][id]
		out = append(out, &c)
	}
	return out, nil
}

// ReadHost reads every lane in id order: the fake's cursor is the last id.
func (q *memQueue) ReadHost(host string, after spool.HostCursor, max int) ([]*spool.Message, spool.HostCursor, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var ids []uint64
	for id := range q.queued[host] {
		if id > after.After {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var out []*spool.Message
	for _, id := range ids[:min(len(ids), max)] {
		c := *q.queued[host][id]
		out = append(out, &c)
		after.After = id
	}
	return out, after, nil
}
func (q *memQueue) Lanes(host string) []spool.LaneUsage {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := map[spool.Lane]int{}
	for _, m := range q.queued[host] {
		n[m.Lane()]++
	}
	var out []spool.LaneUsage
	for l, c := range n {
		out = append(out, spool.LaneUsage{Lane: l, Queued: c})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Key != out[j].Key {
			return out[i].Key < out[j].Key
		}
		return out[i].Priority.Rank() < out[j].Priority.Rank()
	})
	return out
}
func (q *memQueue) Get(host string, l spool.Lane, id uint64) (*spool.Message, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	m := q.queued[host][id]
	if m == nil || m.Lane() != l {
		return nil, spool.ErrNotQueued
	}
	c := *m
	return &c, nil
}
func (q *memQueue) DeleteThen(ms []*spool.Message, done func(error)) {
	q.mu.Lock()
	wait, held := q.deleteTakes, q.deleteHeld
	q.mu.Unlock()
	go func() {
		time.Sleep(wait)
		if held != nil {
			<-held
		}
		q.mu.Lock()
		for _, m := range ms {
			delete(q.queued[m.Host], m.ID)
			q.deleted++
		}
		q.mu.Unlock()
		done(nil)
	}()
}
func (q *memQueue) Update(m *spool.Message) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.updates++
	if _, ok := q.queued[m.Host][m.ID]; ok { // its delivery state, as the spool records it
		c := *m
		q.queued[m.Host][m.ID] = &c
	}
}
func (q *memQueue) Bury(m *spool.Message, reason string, at time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.queued[m.Host], m.ID)
	q.dead = append(q.dead, m)
	q.why = append(q.why, reason)
}
func (q *memQueue) HostUsage(host string) spool.HostUsage {
	q.mu.Lock()
	defer q.mu.Unlock()
	return spool.HostUsage{Messages: int64(len(q.queued[host]))}
}
func (q *memQueue) Hosts() map[string]spool.HostUsage {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := map[string]spool.HostUsage{}
	for h, ms := range q.queued {
		if len(ms) > 0 {
			out[h] = spool.HostUsage{Messages: int64(len(ms))}
		}
	}
	return out
}
func (q *memQueue) left() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, ms := range q.queued {
		n += len(ms)
	}
	return n
}

// receiver is an in-memory partner: handle answers each request and every
// request is recorded with its (fake) arrival time.
type receiver struct {
	mu     sync.Mutex
	got    []arrival
	handle func(r *http.Request, n int) (int, http.Header)
	answer string // the body of every answer
}

type arrival struct {
	at   time.Time
	host string
	path string
	body string
	hdr  http.Header
}

func (rc *receiver) RoundTrip(r *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.got = append(rc.got, arrival{time.Now(), r.URL.Host, r.URL.Path, string(body), r.Header.Clone()})
	n := len(rc.got)
	rc.mu.Unlock()
	status, h := 200, http.Header{}
	if rc.handle != nil {
		status, h = rc.handle(r, n)
	}
	if status == 0 { // the handler gave up: what a real client reports
		return nil, r.Context().Err()
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(rc.answer)), Request: r}, nil
}

func (rc *receiver) arrivals(host string) []arrival {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []arrival
	for _, a := range rc.got {
		if host == "" || a.host == host {
			out = append(out, a)
		}
	}
	return out
}

// fixed is a policy source giving every host p.
func fixed(p Policy) func(string) *Policy {
	return func(string) *Policy { return &p }
}

func policy(rate float64, burst, conc int) Policy {
	return Policy{
		Limits: pacer.Limits{Rate: rate, Burst: burst, Concurrency: conc, Adaptive: true,
			HoldSchedule: []time.Duration{2 * time.Second, 5 * time.Second}, MaxRetryAfter: time.Minute,
			BreakerFailures: 5, BreakerCooldown: 30 * time.Second},
		Timeout: 10 * time.Second, MaxAttempts: 5, MaxAge: 72 * time.Hour,
		BackoffInitial: time.Second, BackoffMax: time.Minute, Retry4xx: []int{408, 425},
	}
}

func setup(t *testing.T, rc *receiver, pols map[string]Policy, maxBuffered int64) (*Dispatcher, *memQueue) {
	t.Helper()
	q := newMemQueue()
	d := New(Options{
		Reader: q, Store: q, Stats: q, Journal: q,
		Policy: func(h string) *Policy {
			p, ok := pols[h]
			if !ok {
				p = policy(10, 20, 4)
			}
			return &p
		},
		Client:      &http.Client{Transport: rc},
		Logger:      slog.New(slog.DiscardHandler),
		MaxBuffered: maxBuffered,
	})
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(context.Background()) })
	return d, q
}

// startWith starts a dispatcher on q with one policy for every host and
// the given client; it is stopped at the end of the test.
func startWith(t *testing.T, q *memQueue, pol Policy, client *http.Client) *Dispatcher {
	t.Helper()
	d := New(Options{Reader: q, Store: q, Stats: q, Journal: q, Policy: fixed(pol), Client: client, Logger: slog.New(slog.DiscardHandler)})
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(context.Background()) })
	return d
}

// waitEmpty advances fake time until the queue is empty or limit passes.
func waitEmpty(t *testing.T, q *memQueue, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for q.left() > 0 {
		if time.Since(start) > limit {
			t.Fatalf("%d messages still queued after %v", q.left(), limit)
		}
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
	}
	return time.Since(start)
}

func maxPerWindow(as []arrival, w time.Duration) int {
	best, j := 0, 0
	for i := range as {
		for as[i].at.Sub(as[j].at) >= w {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

func TestPacedDeliveryExactlyOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		d, q := setup(t, rc, map[string]Policy{"partner.example": policy(200, 20, 4)}, 0)
		q.add("partner.example", 2000)
		took := waitEmpty(t, q, time.Minute)
		got := rc.arrivals("partner.example")
		if len(got) != 2000 {
			t.Fatalf("%d arrivals, want 2000", len(got))
		}
		seen := map[string]bool{}
		for _, a := range got {
			if seen[a.path] {
				t.Fatalf("%s delivered twice", a.path)
			}
			seen[a.path] = true
			if want := "body-" + a.path[len("/hook/"):]; a.body != want {
				t.Fatalf("body %q for %s, want %q", a.body, a.path, want)
			}
		}
		if n := maxPerWindow(got, time.Second); n > 220 {
			t.Fatalf("%d arrivals in one second, want at most 220", n)
		}
		// 2000 at 200/s after a burst of 20: 9.9 s.
		if took < 9*time.Second || took > 11*time.Second {
			t.Fatalf("took %v, want about 10s", took)
		}
		synctest.Wait()
		if n := q.inFlight(); n != 0 {
			t.Fatalf("%d attempts begun and never ended", n)
		}
		if hs, _ := d.Host("partner.example"); hs.Delivered != 2000 || d.Delivered() != 2000 {
			t.Fatalf("delivered: %d to the host, %d in all; want 2000", hs.Delivered, d.Delivered())
		}
		q.mu.Lock()
		defer q.mu.Unlock()
		if len(q.attempts) != 2000 {
			t.Fatalf("%d webhooks with a journaled attempt, want 2000", len(q.attempts))
		}
		for id, as := range q.attempts {
			if len(as) != 1 || as[0].Status != 200 {
				t.Fatalf("webhook %d: attempts %+v, want one with 200", id, as)
			}
			if b := q.bodies[id]; b == nil || string(b.Body) != fmt.Sprint("body-", id-1) {
				t.Fatalf("webhook %d: the journal kept %+v, want its request", id, b)
			}
		}
	})
}

// TestDeliveredNotDeletedBounded: a delivery gives its slot back once
// answered, and a host starts an attempt only while its requests in
// flight and answered with the delete pending are below its settle cap,
// 2×concurrency, so a crash can repeat at most that many: at every
// arrival, the webhooks delivered but not yet deleted (this one
// included) are at most 2×concurrency.
func TestDeliveredNotDeletedBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const conc = 3
		rc := &receiver{}
		_, q := setup(t, rc, map[string]Policy{"partner.example": policy(1000, 100, conc)}, 0)
		q.deleteTakes = 50 * time.Millisecond
		worst := 0
		rc.handle = func(r *http.Request, n int) (int, http.Header) {
			q.mu.Lock()
			worst = max(worst, n-q.deleted)
			q.mu.Unlock()
			return 200, nil
		}
		q.add("partner.example", 60)
		waitEmpty(t, q, time.Minute)
		if got := len(rc.arrivals("")); got != 60 {
			t.Fatalf("%d arrivals, want 60", got)
		}
		if worst != 2*conc {
			t.Fatalf("up to %d webhooks delivered and not yet deleted, want the settle cap, 2×concurrency = %d", worst, 2*conc)
		}
	})
}

func TestSlowHostDoesNotSlowFastHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		_, q := setup(t, rc, map[string]Policy{
			"slow.example": policy(1, 1, 1),
			"fast.example": policy(1000, 100, 8),
		}, 0)
		q.add("slow.example", 200)
		q.add("fast.example", 2000)
		start := time.Now()
		for len(rc.arrivals("fast.example")) < 2000 {
			if time.Since(start) > 6*time.Second {
				t.Fatalf("fast host: %d of 2000 after 6s", len(rc.arrivals("fast.example")))
			}
			time.Sleep(10 * time.Millisecond)
			synctest.Wait()
		}
		if took := time.Since(start); took > 2100*time.Millisecond {
			t.Fatalf("fast host took %v, want ~1.9s at its own rate", took)
		}
	})
}

func TestHoldOn429KeepsOrderAndAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{handle: func(r *http.Request, n int) (int, http.Header) {
			if n == 3 {
				return 429, http.Header{"Retry-After": {"3"}}
			}
			return 200, nil
		}}
		_, q := setup(t, rc, map[string]Policy{"p.example": policy(100, 1, 1)}, 0)
		q.add("p.example", 10)
		waitEmpty(t, q, time.Minute)
		got := rc.arrivals("")
		if len(got) != 11 {
			t.Fatalf("%d requests, want 11 (10 + one 429)", len(got))
		}
		if got[3].path != got[2].path {
			t.Fatalf("after the hold %s went first, want the held %s", got[3].path, got[2].path)
		}
		if gap := got[3].at.Sub(got[2].at); gap < 3*time.Second || gap > 3100*time.Millisecond {
			t.Fatalf("hold lasted %v, want 3s", gap)
		}
		if len(q.dead) != 0 {
			t.Fatal("a 429 sent a message to the dead letters")
		}
	})
}

func TestOtherHostsCarryOnDuringHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{handle: func(r *http.Request, n int) (int, http.Header) {
			if r.URL.Host == "held.example" {
				return 429, http.Header{"Retry-After": {"30"}}
			}
			return 200, nil
		}}
		_, q := setup(t, rc, map[string]Policy{"held.example": policy(50, 10, 4), "free.example": policy(200, 20, 4)}, 0)
		q.add("held.example", 50)
		synctest.Wait()
		start := time.Now()
		q.add("free.example", 2000)
		for len(rc.arrivals("free.example")) < 2000 {
			if time.Since(start) > 15*time.Second {
				t.Fatal("free host stalled behind the held one")
			}
			time.Sleep(10 * time.Millisecond)
			synctest.Wait()
		}
		if took := time.Since(start); took < 9*time.Second || took > 11*time.Second {
			t.Fatalf("free host took %v, want ~9.9s at its own 200/s", took)
		}
		if n := len(rc.arrivals("held.example")); n > 4 {
			t.Fatalf("held host got %d requests during a 30s hold, want the first in-flight ones only", n)
		}
	})
}

func TestPermanentAndExhaustedGoToDeadLetters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{handle: func(r *http.Request, n int) (int, http.Header) {
			if strings.HasPrefix(r.URL.Host, "gone") {
				return 410, nil
			}
			return 500, nil
		}}
		p := policy(100, 10, 2)
		p.MaxAttempts = 3
		_, q := setup(t, rc, map[string]Policy{"gone.example": p, "broken.example": p}, 0)
		q.add("gone.example", 5)
		q.add("broken.example", 1)
		waitEmpty(t, q, 10*time.Minute)
		if n := len(rc.arrivals("gone.example")); n != 5 {
			t.Fatalf("410 host got %d requests, want each of 5 tried exactly once", n)
		}
		broken := rc.arrivals("broken.example")
		if len(broken) != 3 {
			t.Fatalf("500 host got %d attempts, want max_attempts=3", len(broken))
		}
		for i := 1; i < len(broken); i++ {
			if gap := broken[i].at.Sub(broken[i-1].at); gap < 10*time.Millisecond || gap > time.Minute {
				t.Fatalf("retry %d after %v: want a jittered backoff", i, gap)
			}
		}
		if len(q.dead) != 6 {
			t.Fatalf("%d dead letters, want 6", len(q.dead))
		}
		for i, why := range q.why {
			if !strings.Contains(why, "410") && !strings.Contains(why, "max_attempts") {
				t.Fatalf("dead letter %d reason %q", i, why)
			}
		}
	})
}

func TestBreakerStopsSendingToDeadHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{handle: func(r *http.Request, n int) (int, http.Header) { return 503, nil }}
		p := policy(100, 50, 4)
		p.MaxAttempts = 1000
		p.BackoffInitial, p.BackoffMax = 10*time.Millisecond, 20*time.Millisecond
		d, q := setup(t, rc, map[string]Policy{"down.example": p}, 0)
		q.add("down.example", 100)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		n := len(rc.arrivals(""))
		if n < 5 || n > 8 {
			t.Fatalf("%d attempts before the breaker opened, want 5 (+ in flight)", n)
		}
		if st, _ := d.Host("down.example"); st.Breaker != pacer.BreakerOpen {
			t.Fatalf("breaker %q, want open", st.Breaker)
		}
		time.Sleep(26 * time.Second) // past the 30 s cooldown: one probe
		synctest.Wait()
		if m := len(rc.arrivals("")); m != n+1 {
			t.Fatalf("%d attempts after cooldown, want exactly one probe more than %d", m, n)
		}
	})
}

// syncBuffer is a log destination that tests read while the dispatcher
// writes.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) count(substr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), substr)
}

// TestBreakerTransitionsAreLogged: each transition of the breaker is
// logged once, however many attempts were in flight, and while it is open
// the host's status says when the probe goes.
func TestBreakerTransitionsAreLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var up atomic.Bool
		rc := &receiver{handle: func(r *http.Request, n int) (int, http.Header) {
			if up.Load() {
				return 200, nil
			}
			return 503, nil
		}}
		p := policy(100, 50, 4)
		p.MaxAttempts = 1000
		p.BackoffInitial, p.BackoffMax = 10*time.Millisecond, 20*time.Millisecond
		logs := &syncBuffer{}
		q := newMemQueue()
		d := New(Options{Reader: q, Store: q, Stats: q, Journal: q, Policy: fixed(p), Client: &http.Client{Transport: rc},
			Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err := d.Start(); err != nil {
			t.Fatal(err)
		}
		defer d.Stop(context.Background())
		start := time.Now()
		q.add("down.example", 20)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := logs.count(`msg="breaker opened`); n != 1 || logs.count("from=closed") != 1 {
			t.Fatalf("%d 'breaker opened' lines after the failures, want 1 from closed:\n%s", n, logs.b.String())
		}
		st, _ := d.Host("down.example")
		if st.BreakerProbeAt == nil || st.BreakerProbeAt.Sub(start) < 30*time.Second || st.BreakerProbeAt.Sub(start) > 31*time.Second {
			t.Fatalf("open breaker's probe at %v, want 30 s after it opened", st.BreakerProbeAt)
		}

		time.Sleep(30 * time.Second) // the probe goes, and fails
		synctest.Wait()
		if logs.count(`msg="breaker half-open`) != 1 || logs.count(`msg="breaker opened`) != 2 || logs.count("from=half-open") != 1 {
			t.Fatalf("after a failed probe, want one half-open line and a second opened line from half-open:\n%s", logs.b.String())
		}
		up.Store(true)
		time.Sleep(31 * time.Second) // the next probe succeeds
		waitEmpty(t, q, time.Minute)
		if logs.count(`msg="breaker half-open`) != 2 || logs.count(`msg="breaker closed`) != 1 {
			t.Fatalf("after a good probe, want a second half-open line and one closed line:\n%s", logs.b.String())
		}
		if st, _ := d.Host("down.example"); st.Breaker != pacer.BreakerClosed || st.BreakerProbeAt != nil {
			t.Fatalf("breaker %q probe at %v after recovery, want closed and none", st.Breaker, st.BreakerProbeAt)
		}
	})
}

// TestIDAndAttemptHeaders: every attempt carries the message's id and its
// number, under the names the policy gives; an empty name sends none.
func TestIDAndAttemptHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		rc.handle = func(r *http.Request, n int) (int, http.Header) {
			if r.URL.Host == "flaky.example" && len(rc.arrivals("flaky.example")) <= 2 {
				return 503, nil
			}
			return 200, nil
		}
		p := policy(100, 10, 1)
		p.IDHeader, p.AttemptHeader = "X-Hookpace-Id", "X-Hookpace-Attempt"
		quiet := policy(100, 10, 1)
		_, q := setup(t, rc, map[string]Policy{"flaky.example": p, "quiet.example": quiet}, 0)
		q.add("flaky.example", 1)
		q.add("quiet.example", 1)
		waitEmpty(t, q, time.Minute)
		got := rc.arrivals("flaky.example")
		if len(got) != 3 {
			t.Fatalf("%d attempts, want 3 (two 503s, then 200)", len(got))
		}
		for i, a := range got {
			if id, n := a.hdr.Get("X-Hookpace-Id"), a.hdr.Get("X-Hookpace-Attempt"); id != spool.IDString(1) || n != fmt.Sprint(i+1) {
				t.Errorf("attempt %d: X-Hookpace-Id %q, X-Hookpace-Attempt %q; want %q and %d", i+1, id, n, spool.IDString(1), i+1)
			}
		}
		for _, a := range rc.arrivals("quiet.example") {
			if _, ok := a.hdr["X-Hookpace-Id"]; ok {
				t.Errorf("an id header with no name configured: %v", a.hdr)
			}
		}
	})
}

func TestWindowReadsFromQueueInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		// A 1-byte budget: every message is read back from the queue.
		_, q := setup(t, rc, map[string]Policy{"p.example": policy(1000, 10, 1)}, 1)
		q.add("p.example", 500)
		waitEmpty(t, q, time.Minute)
		got := rc.arrivals("")
		if len(got) != 500 {
			t.Fatalf("%d arrivals, want 500", len(got))
		}
		for i, a := range got {
			if a.path != fmt.Sprintf("/hook/%d", i) {
				t.Fatalf("arrival %d is %s: not FIFO", i, a.path)
			}
		}
	})
}

func TestRestartPicksUpBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		q := newMemQueue()
		// Messages already in the queue before the dispatcher exists.
		q.add("a.example", 30)
		q.add("b.example", 30)
		startWith(t, q, policy(100, 10, 2), &http.Client{Transport: rc})
		waitEmpty(t, q, time.Minute)
		if n := len(rc.arrivals("")); n != 60 {
			t.Fatalf("%d arrivals after restart, want 60", n)
		}
	})
}

// TestPauseIsRecordedAndRestored: the dispatcher records a pause in its
// queue before applying it, a dispatcher started on that queue later (a
// restart) holds the host until Resume, and a pause the queue could not
// record changes nothing.
func TestPauseIsRecordedAndRestored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		q := newMemQueue()
		opts := Options{Reader: q, Store: q, Stats: q, Journal: q, Policy: fixed(policy(100, 10, 2)),
			Client: &http.Client{Transport: rc}, Logger: slog.New(slog.DiscardHandler)}
		first := New(opts)
		if err := first.Start(); err != nil {
			t.Fatal(err)
		}
		if err := first.Pause("p.example"); err != nil {
			t.Fatal(err)
		}
		q.pauseErr = errors.New("disk says no")
		if err := first.Pause("q.example"); err == nil {
			t.Fatal("a pause the queue could not record was reported done")
		}
		if _, known := first.Host("q.example"); known {
			t.Fatal("a pause that was not recorded was applied")
		}
		q.pauseErr = nil
		first.Stop(context.Background())
		if got, _ := q.Paused(); fmt.Sprint(got) != "[p.example]" {
			t.Fatalf("recorded pauses %v, want [p.example]", got)
		}

		q.add("p.example", 5)
		d := New(opts)
		if err := d.Start(); err != nil {
			t.Fatal(err)
		}
		defer d.Stop(context.Background())
		time.Sleep(time.Minute)
		synctest.Wait()
		if st, _ := d.Host("p.example"); !st.Paused || len(rc.arrivals("")) != 0 {
			t.Fatalf("after a restart: paused %v, %d sent; want the pause to hold", st.Paused, len(rc.arrivals("")))
		}
		if ok, err := d.Resume("unknown.example"); ok || err != nil {
			t.Fatalf("resume of an unknown host: %v, %v", ok, err)
		}
		if ok, err := d.Resume("p.example"); !ok || err != nil {
			t.Fatalf("resume: %v, %v", ok, err)
		}
		waitEmpty(t, q, time.Minute)
		if got, _ := q.Paused(); len(got) != 0 || len(rc.arrivals("")) != 5 {
			t.Fatalf("after resume: recorded pauses %v, %d sent; want none and 5", got, len(rc.arrivals("")))
		}
	})
}

func TestReloadChangesRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		d, q := setup(t, rc, map[string]Policy{"p.example": policy(5, 1, 2)}, 0)
		q.add("p.example", 200)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		d.SetPolicy(fixed(policy(100, 1, 2)))
		took := waitEmpty(t, q, time.Minute)
		// ~190 left at 100/s.
		if took > 2500*time.Millisecond {
			t.Fatalf("after reload to 100/s the rest took %v", took)
		}
	})
}

func TestStopAbandonsWithoutCountingAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{handle: func(r *http.Request, n int) (int, http.Header) {
			<-r.Context().Done() // a partner that never answers
			return 0, nil
		}}
		q := newMemQueue()
		d := New(Options{Reader: q, Store: q, Stats: q, Journal: q, Policy: fixed(policy(10, 10, 2)),
			Client: &http.Client{Transport: rc}, Logger: slog.New(slog.DiscardHandler)})
		if err := d.Start(); err != nil {
			t.Fatal(err)
		}
		q.add("slow.example", 5)
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := d.Stop(ctx); err == nil {
			t.Fatal("Stop returned nil with attempts still in flight past its deadline")
		}
		if q.left() != 5 || q.updates != 0 || len(q.dead) != 0 {
			t.Fatalf("after an abandoned shutdown: %d queued, %d updates, %d dead; want 5, 0, 0", q.left(), q.updates, len(q.dead))
		}
		if n := len(rc.arrivals("")); n != 2 {
			t.Fatalf("%d attempts started, want the 2 the concurrency allows", n)
		}
	})
}

// TestStopIsBoundedWhileDeletesWait: deliveries whose deletes wait on the
// queue (nothing cancels them) do not hold Stop past its deadline and the
// grace: it returns an *UnsettledError counting them (the 4 of the host's
// settle cap, 2×concurrency), and their webhooks stay queued.
func TestStopIsBoundedWhileDeletesWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		q := newMemQueue()
		q.deleteHeld = make(chan struct{})
		d := New(Options{Reader: q, Store: q, Stats: q, Journal: q, Policy: fixed(policy(10, 10, 2)),
			Client: &http.Client{Transport: rc}, Logger: slog.New(slog.DiscardHandler)})
		if err := d.Start(); err != nil {
			t.Fatal(err)
		}
		q.add("full.example", 5)
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		err := d.Stop(ctx)
		var unsettled *UnsettledError
		if !errors.As(err, &unsettled) || unsettled.Attempts != 4 || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop with 4 deletes held = %v, want an UnsettledError for 4 attempts past the deadline", err)
		}
		if took := time.Since(start); took != time.Second+settleGrace {
			t.Fatalf("Stop took %v, want its deadline plus settleGrace (%v)", took, time.Second+settleGrace)
		}
		if q.left() != 5 {
			t.Fatalf("%d queued after the stop, want all 5 (4 delivered, their deletes held)", q.left())
		}
		close(q.deleteHeld) // the spool's close answers held deletes
		synctest.Wait()
		if q.left() != 1 {
			t.Fatalf("%d queued once the held deletes went ahead, want 1", q.left())
		}
	})
}

type refusedErr struct{}

func (refusedErr) Error() string   { return "egress to 10.0.0.7 (moved.example) refused: private" }
func (refusedErr) Refused() string { return "10.0.0.7: private" }

func TestRefusedAtDeliveryGoesToDeadLetters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The destination's DNS now points at a private address: the dialer
		// refuses it, and the message is buried with the reason at once.
		q := newMemQueue()
		startWith(t, q, policy(10, 10, 2), &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return nil, fmt.Errorf("dial: %w", refusedErr{})
		})})
		q.add("moved.example", 3)
		synctest.Wait()
		if len(q.dead) != 3 {
			t.Fatalf("%d dead letters, want 3", len(q.dead))
		}
		for _, why := range q.why {
			if why != "egress refused: 10.0.0.7: private" {
				t.Fatalf("reason %q", why)
			}
		}
		if q.dead[0].Attempts != 1 {
			t.Fatalf("attempts %d, want 1", q.dead[0].Attempts)
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestSlowHostDoesNotLowerOthersThroughput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{handle: func(r *http.Request, n int) (int, http.Header) {
			if r.URL.Host == "slow.example" {
				time.Sleep(10 * time.Second) // answers in 10 s
			}
			return 200, nil
		}}
		_, q := setup(t, rc, map[string]Policy{"slow.example": policy(100, 10, 4), "fast.example": policy(200, 20, 4)}, 0)
		q.add("slow.example", 500)
		start := time.Now()
		q.add("fast.example", 1000)
		for len(rc.arrivals("fast.example")) < 1000 {
			if time.Since(start) > 10*time.Second {
				t.Fatalf("fast host: %d of 1000 after 10 s", len(rc.arrivals("fast.example")))
			}
			time.Sleep(10 * time.Millisecond)
			synctest.Wait()
		}
		// 1000 at 200/s after a burst of 20: ~4.9 s, as if alone.
		if took := time.Since(start); took > 5200*time.Millisecond {
			t.Fatalf("fast host took %v beside a slow one, want its own ~4.9 s", took)
		}
		if n := len(rc.arrivals("slow.example")); n > 4+4 {
			t.Fatalf("slow host got %d requests in flight, want its concurrency cap", n)
		}
	})
}

// Hosts with nothing queued and nothing worth remembering are forgotten
// after IdleTTL, so that many short-lived destinations don't pile up; a
// host whose bucket is still refilling, or that is paused, is kept.
func TestIdleHostsAreForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		d, q := setup(t, rc, map[string]Policy{
			"a.example":    policy(10, 2, 1),
			"slow.example": policy(1.0/3600, 5, 1), // one an hour: its bucket stays short
		}, 0)
		q.add("a.example", 3)
		q.add("slow.example", 1)
		waitEmpty(t, q, time.Minute)
		if err := d.Pause("paused.example"); err != nil {
			t.Fatal(err)
		}

		names := func() []string {
			var out []string
			for _, h := range d.Hosts() {
				out = append(out, h.Host)
			}
			sort.Strings(out)
			return out
		}
		if got := fmt.Sprint(names()); got != "[a.example paused.example slow.example]" {
			t.Fatalf("hosts %s right after delivery", got)
		}
		time.Sleep(9 * time.Minute)
		synctest.Wait()
		if got := fmt.Sprint(names()); got != "[a.example paused.example slow.example]" {
			t.Fatalf("hosts %s before IdleTTL", got)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if got := fmt.Sprint(names()); got != "[paused.example slow.example]" {
			t.Fatalf("hosts %s after IdleTTL, want a.example forgotten", got)
		}

		// A forgotten host starts afresh: its burst, then its rate.
		pacesAfresh(t, q, rc, "after being forgotten")
	})
}

// TestDrainTime: the Retry-After estimate for a host at its max_queued
// follows the host's pace, and its hold.
func TestDrainTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{handle: func(r *http.Request, n int) (int, http.Header) {
			if r.URL.Host == "held.example" {
				return 429, http.Header{"Retry-After": {"30"}}
			}
			return 200, nil
		}}
		d, q := setup(t, rc, map[string]Policy{
			"slow.example": policy(5.0/60, 1, 1), // 5/m
			"held.example": policy(10, 1, 1),
		}, 0)
		if _, ok := d.DrainTime("unknown.example", 1, time.Now()); ok {
			t.Fatal("an estimate for a host never seen")
		}
		q.add("slow.example", 3)
		q.add("held.example", 3)
		synctest.Wait()
		if got, ok := d.DrainTime("slow.example", 2, time.Now()); !ok || got < 23*time.Second || got > 25*time.Second {
			t.Fatalf("slow host, 2 to go: %v (%v), want ~24s at 5/m", got, ok)
		}
		// The first attempt was answered 429 with Retry-After 30: the
		// estimate starts after the hold.
		if got, ok := d.DrainTime("held.example", 1, time.Now()); !ok || got < 30*time.Second || got > 31*time.Second {
			t.Fatalf("held host, 1 to go: %v (%v), want 30s of hold and a little", got, ok)
		}
		if err := d.Pause("slow.example"); err != nil {
			t.Fatal(err)
		}
		if got, ok := d.DrainTime("slow.example", 1, time.Now()); ok {
			t.Fatalf("paused host: %v, want no estimate", got)
		}
	})
}

// TestIdleHostsRest: a host whose webhooks are delivered and whose pacer
// has come back to what a new one would be drops its pacer within
// restEvery, shows the same state, and paces as before when webhooks
// come again. A host that remembers failures keeps its pacer.
func TestIdleHostsRest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{handle: func(r *http.Request, n int) (int, http.Header) {
			if r.URL.Host == "failing.example" {
				return 503, nil
			}
			return 200, nil
		}}
		pols := map[string]Policy{"a.example": policy(10, 2, 1), "failing.example": policy(10, 2, 1)}
		p := pols["failing.example"]
		p.MaxAttempts = 1
		pols["failing.example"] = p
		d, q := setup(t, rc, pols, 0)
		q.add("a.example", 3)
		q.add("failing.example", 1)
		waitEmpty(t, q, time.Minute)
		time.Sleep(time.Second) // both buckets full again
		synctest.Wait()

		state := func(name string) (pacer.State, bool) {
			d.mu.Lock()
			defer d.mu.Unlock()
			h := d.hosts[name]
			return h.gate.State(time.Now()), h.pace == nil
		}
		before, resting := state("a.example")
		if resting {
			t.Fatal("a.example at rest before the sweep")
		}
		time.Sleep(restEvery)
		synctest.Wait()
		after, resting := state("a.example")
		if !resting {
			t.Fatal("a.example keeps its pacer after restEvery idle")
		}
		if !reflect.DeepEqual(before, after) {
			t.Errorf("state at rest %+v, want %+v as before", after, before)
		}
		d.mu.Lock()
		clean := d.hosts["a.example"].clean
		d.mu.Unlock()
		if clean != 3 {
			t.Errorf("clean successes kept at rest: %d, want 3", clean)
		}
		if _, resting := state("failing.example"); resting {
			t.Error("failing.example at rest with a failure counted")
		}

		// Revived, the host paces as a fresh one: its burst, then its rate.
		pacesAfresh(t, q, rc, "revived")
		if _, resting := state("a.example"); resting {
			t.Error("a.example at rest right after its deliveries")
		}
	})
}

// pacesAfresh sends 4 more webhooks to a.example, which has had 3 (burst
// 2, 10/s), and checks they go as to a new host: two at once, the third
// a tenth of a second later.
func pacesAfresh(t *testing.T, q *memQueue, rc *receiver, as string) {
	t.Helper()
	start := time.Now()
	q.add("a.example", 4)
	waitEmpty(t, q, time.Minute)
	got := rc.arrivals("a.example")[3:]
	if len(got) != 4 || got[1].at.Sub(start) > 0 || got[2].at.Sub(start) < 90*time.Millisecond {
		t.Fatalf("%s a.example got %d, the third at %v; want a burst of 2 then 10/s",
			as, len(got), got[min(2, len(got)-1)].at.Sub(start))
	}
}
