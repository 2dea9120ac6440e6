package deliver

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// addLaned queues n webhooks for host, each shaped by set(i, m) before it
// is announced; paths are /<tag>/<i>.
func (q *memQueue) addLaned(host, tag string, n int, set func(i int, m *spool.Message)) {
	q.mu.Lock()
	var msgs []*spool.Message
	for i := range n {
		q.seq++
		m := &spool.Message{ID: q.seq, Host: host, Method: "POST", URL: fmt.Sprintf("http://%s/%s/%d", host, tag, i),
			Header: http.Header{}, Body: []byte(fmt.Sprintf("%s-%d", tag, i)), Enqueued: time.Now()}
		if set != nil {
			set(i, m)
		}
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

func fairKey(k string) func(int, *spool.Message) {
	return func(_ int, m *spool.Message) { m.Fairness = k }
}

// tags is the first path segment of each arrival, in order.
func tags(as []arrival) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = strings.Split(a.path, "/")[1]
	}
	return out
}

// TestFairnessKeyWaitsOneTurn: behind one key's backlog of 300, another
// key's single webhook waits for one turn, not for the backlog; and
// within each key the order stays FIFO.
func TestFairnessKeyWaitsOneTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		_, q := setup(t, rc, map[string]Policy{"p.example": policy(10, 1, 1)}, 0)
		q.addLaned("p.example", "bulk", 300, fairKey("tenant-a"))
		time.Sleep(time.Second) // a few of the backlog go first
		synctest.Wait()
		sent := len(rc.arrivals(""))
		q.addLaned("p.example", "one", 1, fairKey("tenant-b"))
		waitEmpty(t, q, 2*time.Minute)
		got := tags(rc.arrivals(""))
		at := -1
		for i, tag := range got {
			if tag == "one" {
				at = i
			}
		}
		// Staged (one request's worth) and then one turn of tenant-a.
		if at < 0 || at > sent+2 {
			t.Fatalf("tenant-b's webhook was arrival %d; %d had gone when it came, want it within 2 after", at, sent)
		}
		n := 0
		for _, a := range rc.arrivals("") {
			if strings.HasPrefix(a.path, "/bulk/") {
				if a.path != fmt.Sprintf("/bulk/%d", n) {
					t.Fatalf("tenant-a's arrival %d is %s: not FIFO within the key", n, a.path)
				}
				n++
			}
		}
	})
}

// TestFairnessWeights: a key with weight 3 gets three turns to another's
// one while both have work.
func TestFairnessWeights(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		pol := policy(10, 1, 1)
		pol.Weights = map[string]int{"big": 3}
		_, q := setup(t, rc, map[string]Policy{"p.example": pol}, 0)
		q.addLaned("p.example", "big", 60, fairKey("big"))
		q.addLaned("p.example", "small", 60, fairKey("small"))
		waitEmpty(t, q, 2*time.Minute)
		got := tags(rc.arrivals(""))[:80]
		big := 0
		for _, tag := range got {
			if tag == "big" {
				big++
			}
		}
		// 80 sends at 3:1 are 60 big and 20 small, give or take the
		// first turn's and the stage's.
		if big < 57 || big > 62 {
			t.Fatalf("%d of the first 80 arrivals are the weight-3 key's, want about 60: %v", big, got)
		}
	})
}

// TestPriorityKeepsAShareForLower: high goes first, but low still gets
// min_share of the turns while both have work.
func TestPriorityKeepsAShareForLower(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		pol := policy(20, 1, 1)
		pol.MinShare = 0.2
		_, q := setup(t, rc, map[string]Policy{"p.example": pol}, 0)
		q.addLaned("p.example", "low", 100, func(_ int, m *spool.Message) { m.Priority = spool.PriorityLow })
		q.addLaned("p.example", "high", 100, func(_ int, m *spool.Message) { m.Priority = spool.PriorityHigh })
		waitEmpty(t, q, 2*time.Minute)
		got := tags(rc.arrivals(""))
		low := 0
		for _, tag := range got[10:110] {
			if tag == "low" {
				low++
			}
		}
		// While high has work, low gets a fifth of the turns.
		if low < 17 || low > 23 {
			t.Fatalf("%d low of 100 arrivals while high had work, want about 20: %v", low, got[:110])
		}
	})
}

// TestOrderingKeyOneAtATime: the webhooks of an ordering key go one at a
// time, in order, each after the one before got its 2xx; a retry blocks
// only its own key, and the others go on meanwhile.
func TestOrderingKeyOneAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		failed := false
		rc := &receiver{handle: func(r *http.Request, n int) (int, http.Header) {
			if r.URL.Path == "/order/0" && !failed {
				failed = true
				return 500, nil // order.created fails once: backoff 1 s
			}
			return 200, nil
		}}
		_, q := setup(t, rc, map[string]Policy{"p.example": policy(100, 10, 8)}, 0)
		q.addLaned("p.example", "order", 5, func(_ int, m *spool.Message) { m.Ordering = "order-42" })
		q.addLaned("p.example", "other", 20, func(i int, m *spool.Message) { m.Ordering = fmt.Sprint("o-", i) })
		waitEmpty(t, q, time.Minute)
		var order []string
		firstOK := time.Time{}
		others := 0
		for _, a := range rc.arrivals("") {
			if strings.HasPrefix(a.path, "/order/") {
				order = append(order, a.path)
				if a.path == "/order/1" {
					firstOK = a.at
				}
			} else if firstOK.IsZero() {
				others++
			}
		}
		want := []string{"/order/0", "/order/0", "/order/1", "/order/2", "/order/3", "/order/4"}
		if fmt.Sprint(order) != fmt.Sprint(want) {
			t.Fatalf("the ordered key arrived as %v, want %v", order, want)
		}
		if others != 20 {
			t.Fatalf("%d of the 20 other keys' webhooks went while order-42 waited for its retry, want all", others)
		}
	})
}

// TestDelayedDoesNotHoldBackOthers: a webhook with a NotBefore waits for
// it; the webhooks queued behind it go at once.
func TestDelayedDoesNotHoldBackOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		_, q := setup(t, rc, map[string]Policy{"p.example": policy(100, 10, 2)}, 0)
		start := time.Now()
		q.addLaned("p.example", "later", 1, func(_ int, m *spool.Message) { m.NotBefore = start.Add(30 * time.Second) })
		q.addLaned("p.example", "now", 5, nil)
		waitEmpty(t, q, time.Minute)
		got := rc.arrivals("")
		if len(got) != 6 || !strings.HasPrefix(got[5].path, "/later/") {
			t.Fatalf("arrivals %v, want the 5 undelayed first", tags(got))
		}
		if got[4].at.Sub(start) > time.Second {
			t.Fatalf("the undelayed webhooks waited %v", got[4].at.Sub(start))
		}
		if at := got[5].at.Sub(start); at < 30*time.Second || at > 31*time.Second {
			t.Fatalf("the delayed webhook went after %v, want 30s", at)
		}
	})
}

// TestLanesAfterRestart: a backlog in several lanes, with an ordering key
// and a delay, is picked up by a new dispatcher: everything arrives once,
// the ordering key in order.
func TestLanesAfterRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		q := newMemQueue()
		q.addLaned("p.example", "a", 40, fairKey("a"))
		q.addLaned("p.example", "plain", 40, nil)
		q.addLaned("p.example", "ord", 10, func(_ int, m *spool.Message) { m.Fairness, m.Ordering = "a", "k" })
		q.addLaned("p.example", "late", 3, func(_ int, m *spool.Message) { m.NotBefore = time.Now().Add(5 * time.Second) })
		startWith(t, q, policy(200, 10, 4), &http.Client{Transport: rc})
		waitEmpty(t, q, time.Minute)
		got := rc.arrivals("")
		seen := map[string]bool{}
		n := 0
		for _, a := range got {
			if seen[a.path] {
				t.Fatalf("%s arrived twice", a.path)
			}
			seen[a.path] = true
			if strings.HasPrefix(a.path, "/ord/") {
				if a.path != fmt.Sprintf("/ord/%d", n) {
					t.Fatalf("ordered arrival %d is %s", n, a.path)
				}
				n++
			}
		}
		if len(got) != 93 {
			t.Fatalf("%d arrivals, want 93", len(got))
		}
	})
}

// TestPurgeTakesLanes: a purge of a paused host takes what waits in its
// lanes, parked behind an ordering key and delayed too: nothing of it
// arrives after the host is resumed, and a webhook queued afterwards with
// the same ordering key still goes.
func TestPurgeTakesLanes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		d, q := setup(t, rc, map[string]Policy{"p.example": policy(100, 10, 2)}, 0)
		if err := d.Pause("p.example"); err != nil {
			t.Fatal(err)
		}
		q.addLaned("p.example", "ord", 5, func(_ int, m *spool.Message) { m.Ordering = "k" })
		q.addLaned("p.example", "late", 3, func(_ int, m *spool.Message) { m.NotBefore = time.Now().Add(time.Hour) })
		q.addLaned("p.example", "fair", 10, fairKey("t"))
		q.addLaned("p.example", "plain", 10, nil)
		synctest.Wait()
		res, err := d.Purge("p.example", Selection{By: "test"})
		if err != nil || res.Done != 28 {
			t.Fatalf("purge: %+v, %v; want 28 done", res, err)
		}
		if _, err := d.Resume("p.example"); err != nil {
			t.Fatal(err)
		}
		q.addLaned("p.example", "after", 1, func(_ int, m *spool.Message) { m.Ordering = "k" })
		waitEmpty(t, q, time.Minute)
		time.Sleep(2 * time.Hour) // past every delay
		synctest.Wait()
		if got := tags(rc.arrivals("")); fmt.Sprint(got) != "[after]" {
			t.Fatalf("arrivals after the purge: %v, want only [after]", got)
		}
	})
}

// TestOrderedDeadLetterIsLoud: a webhook of an ordering key that becomes
// a dead letter lets the key go on, and the host's status says so.
func TestOrderedDeadLetterIsLoud(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{handle: func(r *http.Request, n int) (int, http.Header) {
			if r.URL.Path == "/ord/1" {
				return 422, nil // permanent
			}
			return 200, nil
		}}
		d, q := setup(t, rc, map[string]Policy{"p.example": policy(100, 10, 4)}, 0)
		q.addLaned("p.example", "ord", 3, func(_ int, m *spool.Message) { m.Ordering = "order-7" })
		waitEmpty(t, q, time.Minute)
		var paths []string
		for _, a := range rc.arrivals("") {
			paths = append(paths, a.path)
		}
		if got := fmt.Sprint(paths); got != "[/ord/0 /ord/1 /ord/2]" {
			t.Fatalf("arrivals %v, want the key in order, on past its dead letter", got)
		}
		hs, _ := d.Host("p.example")
		if hs.Lanes == nil || hs.Lanes.OrderedDead != 1 || hs.Lanes.LastDeadKey != "order-7" {
			t.Fatalf("lanes status %+v, want 1 ordered dead letter of order-7", hs.Lanes)
		}
		if !strings.Contains(hs.Lanes.Text(), "1 dead letters in ordered keys (last order-7") {
			t.Fatalf("status text %q", hs.Lanes.Text())
		}
	})
}

// TestReloadReweighs: a reload's new fairness weights apply to the keys
// already taking turns.
func TestReloadReweighs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		pol := policy(10, 1, 1)
		d, q := setup(t, rc, map[string]Policy{"p.example": pol}, 0)
		d.Pause("p.example")
		q.addLaned("p.example", "big", 60, fairKey("big"))
		q.addLaned("p.example", "small", 60, fairKey("small"))
		synctest.Wait()
		pol.Weights = map[string]int{"big": 4}
		d.SetPolicy(fixed(pol))
		d.Resume("p.example")
		waitEmpty(t, q, 2*time.Minute)
		big := 0
		for _, tag := range tags(rc.arrivals(""))[:50] {
			if tag == "big" {
				big++
			}
		}
		if big < 38 || big > 42 {
			t.Fatalf("%d of the first 50 arrivals are the reweighed key's, want about 40", big)
		}
	})
}

// TestLanesVisible: one host's status names its busiest fairness keys
// with their oldest webhook, what is queued per priority, and the
// ordering key that is blocked, on which webhook and why.
func TestLanesVisible(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{handle: func(r *http.Request, n int) (int, http.Header) {
			return 503, http.Header{"Retry-After": {"600"}}
		}}
		pol := policy(100, 10, 4)
		pol.Limits.MaxRetryAfter = time.Hour
		d, q := setup(t, rc, map[string]Policy{"p.example": pol}, 0)
		q.addLaned("p.example", "ord", 3, func(_ int, m *spool.Message) { m.Fairness, m.Ordering = "t", "order-77" })
		synctest.Wait()
		d.Pause("p.example")
		start := time.Now()
		q.addLaned("p.example", "bulk", 20, func(_ int, m *spool.Message) { m.Fairness, m.Priority = "bulk", spool.PriorityLow })
		q.addLaned("p.example", "hi", 1, func(_ int, m *spool.Message) { m.Fairness, m.Priority = "small", spool.PriorityHigh })
		synctest.Wait()
		hs, _ := d.Host("p.example")
		ls := hs.Lanes
		if ls == nil || len(ls.Busiest) == 0 || ls.Busiest[0].Key != "bulk" || ls.Busiest[0].Queued != 20 ||
			ls.Busiest[0].Oldest == nil || !ls.Busiest[0].Oldest.Equal(start) {
			t.Fatalf("busiest keys %+v, want bulk 20 first, oldest at %v", ls.Busiest, start)
		}
		if ls.Priorities["low"] != 20 || ls.Priorities["high"] != 1 || ls.Priorities["normal"] != 3 {
			t.Fatalf("queued by priority %v", ls.Priorities)
		}
		if len(ls.Blocked) != 1 || ls.Blocked[0].Key != "order-77" || ls.Blocked[0].Waiting != 2 ||
			ls.Blocked[0].State != "retrying" || ls.Blocked[0].LastStatus != 503 {
			t.Fatalf("blocked ordering keys %+v, want order-77 retrying after a 503, 2 waiting", ls.Blocked)
		}
		for _, want := range []string{"keys bulk 20", "priority high 1, normal 3, low 20", "order-77 blocked on", "2 waiting"} {
			if !strings.Contains(ls.Text(), want) {
				t.Errorf("status text %q lacks %q", ls.Text(), want)
			}
		}
	})
}
