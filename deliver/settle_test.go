package deliver

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// slowDeletes is a real spool whose deletes wait for the test: each
// DeleteThen is held until release or openAll submits it to the spool,
// which makes it durable in its next round and then calls its done.
type slowDeletes struct {
	*spool.Spool

	mu   sync.Mutex
	held []func() // each submits one held DeleteThen
	open bool     // deletes go to the spool at once
}

func (q *slowDeletes) DeleteThen(ms []*spool.Message, done func(error)) {
	q.mu.Lock()
	if !q.open {
		q.held = append(q.held, func() { q.Spool.DeleteThen(ms, done) })
		q.mu.Unlock()
		return
	}
	q.mu.Unlock()
	q.Spool.DeleteThen(ms, done)
}

// release submits the first k held deletes.
func (q *slowDeletes) release(k int) {
	q.mu.Lock()
	next := q.held[:k:k]
	q.held = q.held[k:]
	q.mu.Unlock()
	for _, submit := range next {
		submit()
	}
}

// openAll submits every held delete and lets the next go at once.
func (q *slowDeletes) openAll() {
	q.mu.Lock()
	q.open = true
	q.mu.Unlock()
	q.release(q.heldN())
}

func (q *slowDeletes) heldN() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.held)
}

// settleSetup opens a spool in a temporary directory, queues n webhooks
// for p.example (with ordering key key, if any) and starts a dispatcher
// on it with concurrency conc, its deletes held until the test lets them
// go (slowDeletes).
func settleSetup(t *testing.T, rc *receiver, conc, n int, key string) (*Dispatcher, *slowDeletes) {
	t.Helper()
	s, err := openJournaled(spool.Options{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	q := &slowDeletes{Spool: s}
	pol := policy(1e6, 1000, conc)
	pol.Limits.Adaptive = false
	pol.IDHeader = "X-Hookpace-Id"
	d := New(Options{Reader: q, Store: q, Stats: q, Journal: journalOf(q.Spool), Policy: fixed(pol),
		Client: &http.Client{Transport: rc}, Logger: slog.New(slog.DiscardHandler)})
	for i := range n {
		m := &spool.Message{Host: "p.example", Method: "POST", URL: "http://p.example/hook", Header: http.Header{},
			Body: fmt.Appendf(nil, `{"n":%d}`, i), Enqueued: time.Now(), Ordering: key}
		if err := s.Append(context.Background(), m, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		q.openAll()
		d.Stop(context.Background())
		s.Close()
	})
	return d, q
}

// unsettled reports p.example's deliveries answered with their delete
// not durable yet, and the attempts holding one of its send slots.
func unsettled(d *Dispatcher) (answered, sending int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	h := d.hosts["p.example"]
	return h.unsettled, h.gate.InFlight()
}

// TestSlotFreeWhileDeleteIsSlow: a delivery gives its send slot back
// when the partner's answer is read, not when its delete is durable, and
// a host never has more than 2 × concurrency requests sent and not
// deleted durably (in flight or answered with the delete pending: what a
// crash can send twice). With every delete held, the partner gets
// concurrency (2) requests at once, never more, and 2 × concurrency in
// all, each answered while no delete is durable; then the host, at its
// cap, sends nothing until a delete lands, and each that lands lets one
// more go. Once the deletes go ahead, every webhook has arrived exactly
// once and the queue is empty. Holding the slot until the delete is
// durable stops at 2 requests; giving it back without a cap sends all 12.
func TestSlotFreeWhileDeleteIsSlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const conc, n = 2, 12
		answer := make(chan struct{})
		var mu sync.Mutex
		var q *slowDeletes
		ready := make(chan struct{}) // q is set
		now, most, mostOut := 0, 0, 0
		rc := &receiver{handle: func(r *http.Request, arrived int) (int, http.Header) {
			<-ready
			mu.Lock()
			now++
			most = max(most, now)
			// Sent and not deleted durably, this one included.
			deleted := n - int(q.HostUsage("p.example").Messages)
			mostOut = max(mostOut, arrived-deleted)
			mu.Unlock()
			<-answer
			mu.Lock()
			now--
			mu.Unlock()
			return 200, nil
		}}
		var d *Dispatcher
		d, q = settleSetup(t, rc, conc, n, "")
		close(ready)
		synctest.Wait()
		if got := len(rc.arrivals("")); got != conc {
			t.Fatalf("%d requests at the partner before any answer, want concurrency %d", got, conc)
		}

		close(answer) // the partner answers at once from now on; the deletes wait
		synctest.Wait()
		if got := len(rc.arrivals("")); got != 2*conc {
			t.Errorf("%d requests answered while no delete was durable, want 2 × concurrency = %d", got, 2*conc)
		}
		if queued := q.HostUsage("p.example").Messages; queued != n {
			t.Errorf("%d webhooks queued, want all %d: no delete is durable yet", queued, n)
		}
		if answered, sending := unsettled(d); answered != 2*conc || sending != 0 {
			t.Errorf("%d answered with the delete pending and %d in flight, want %d and 0: every slot given back on the answer",
				answered, sending, 2*conc)
		}
		time.Sleep(time.Minute) // the host at its cap waits for its deletes, however long
		synctest.Wait()
		if got := len(rc.arrivals("")); got != 2*conc {
			t.Errorf("%d requests after a minute at the cap, want still %d", got, 2*conc)
		}

		q.release(1) // one delete lands: one more request goes
		synctest.Wait()
		if got := len(rc.arrivals("")); got != 2*conc+1 {
			t.Errorf("%d requests after one delete landed, want %d", got, 2*conc+1)
		}
		if queued := q.HostUsage("p.example").Messages; queued != n-1 {
			t.Errorf("%d webhooks queued after one delete landed, want %d", queued, n-1)
		}

		q.openAll()
		for q.HostUsage("p.example").Messages > 0 {
			time.Sleep(10 * time.Millisecond)
			synctest.Wait()
		}
		seen := map[string]int{}
		for _, a := range rc.arrivals("") {
			seen[a.hdr.Get("X-Hookpace-Id")]++
		}
		if len(seen) != n {
			t.Errorf("%d distinct webhooks arrived, want %d", len(seen), n)
		}
		for id, c := range seen {
			if c != 1 {
				t.Errorf("%s arrived %d times: a webhook answered 2xx was sent again", id, c)
			}
		}
		if most > conc {
			t.Errorf("the partner had %d requests at once, want at most concurrency %d", most, conc)
		}
		if mostOut > 2*conc {
			t.Errorf("up to %d requests sent and not deleted durably, want at most 2 × concurrency = %d", mostOut, 2*conc)
		}
		synctest.Wait()
		if answered, sending := unsettled(d); answered != 0 || sending != 0 {
			t.Errorf("after the queue emptied: %d unsettled, %d sending", answered, sending)
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.inFlight != 0 || d.unsettled != 0 {
			t.Errorf("after the queue emptied: %d slots taken, %d unsettled over all hosts", d.inFlight, d.unsettled)
		}
	})
}

// TestOrderedNextAfterDelete: the next webhook of an ordering key waits
// for the previous one's delete to be durable, not only for its 2xx
// (sent earlier, a crash could repeat both, the earlier after the
// later), and the key's webhooks arrive in order, each once.
func TestOrderedNextAfterDelete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 3
		rc := &receiver{}
		_, q := settleSetup(t, rc, 4, n, "order-1")
		synctest.Wait()
		if got := len(rc.arrivals("")); got != 1 {
			t.Fatalf("%d of the key's webhooks arrived with the first one's delete pending, want 1: the next waits for it", got)
		}
		q.openAll()
		for q.HostUsage("p.example").Messages > 0 {
			time.Sleep(10 * time.Millisecond)
			synctest.Wait()
		}
		got := rc.arrivals("")
		if len(got) != n {
			t.Fatalf("%d arrivals, want %d", len(got), n)
		}
		for i, a := range got {
			if want := fmt.Sprintf(`{"n":%d}`, i); a.body != want {
				t.Errorf("arrival %d is %s, want %s: an ordering key's webhooks go in order, each once", i, a.body, want)
			}
		}
	})
}

// TestBuryWhileSettling: burying a host's queue while some of its
// deliveries are answered with their delete pending buries what was not
// sent and leaves those: they count as in flight, their success stands
// (deleted, not buried), and nothing is sent again.
func TestBuryWhileSettling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const conc, n = 2, 10
		rc := &receiver{}
		d, q := settleSetup(t, rc, conc, n, "")
		synctest.Wait()
		if got := len(rc.arrivals("")); got != 2*conc {
			t.Fatalf("%d requests with every delete pending, want %d", got, 2*conc)
		}
		res, err := d.BuryQueue("p.example", Selection{By: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Done != n-2*conc || res.InFlight != 2*conc {
			t.Errorf("bury: %d buried, %d in flight; want %d and %d", res.Done, res.InFlight, n-2*conc, 2*conc)
		}
		q.openAll()
		for q.HostUsage("p.example").Messages > 0 {
			time.Sleep(10 * time.Millisecond)
			synctest.Wait()
		}
		if got := len(rc.arrivals("")); got != 2*conc {
			t.Errorf("%d requests in all, want the %d sent before the burial", got, 2*conc)
		}
		dead, total, err := q.ListDead(spool.DeadFilter{}, 100)
		if err != nil {
			t.Fatal(err)
		}
		if total != n-2*conc {
			t.Errorf("%d dead letters (%d listed), want %d: a delivered webhook was buried too", total, len(dead), n-2*conc)
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if len(d.purges.inFlight) != 0 {
			t.Errorf("%d webhooks still marked to bury once their attempt ends", len(d.purges.inFlight))
		}
	})
}
