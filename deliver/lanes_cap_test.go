package deliver

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// TestLanesBounded: with room for 8 lanes, 60 fairness keys (arriving,
// and queued before a start) are all served: each webhook arrives once,
// a dead letter is never sent again, a retry goes again, and the host
// never holds more than 8 lanes.
func TestLanesBounded(t *testing.T) {
	old := maxLanes
	maxLanes = 8
	defer func() { maxLanes = old }()
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprint("restart=", restart), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { lanesBounded(t, restart) })
		})
	}
}

func lanesBounded(t *testing.T, restart bool) {
	var mu sync.Mutex
	tried := map[string]int{}
	rc := &receiver{handle: func(r *http.Request, n int) (int, http.Header) {
		mu.Lock()
		defer mu.Unlock()
		tried[r.URL.Path]++
		switch {
		case strings.HasSuffix(r.URL.Path, "/dead"):
			return 422, nil
		case strings.HasSuffix(r.URL.Path, "/flaky") && tried[r.URL.Path] == 1:
			return 500, nil
		}
		return 200, nil
	}}
	pol := policy(200, 10, 4)
	pol.Limits.BreakerFailures = 1000 // a third of the webhooks fail: no breaker here
	q := newMemQueue()
	add := func() {
		for k := range 60 {
			q.addLaned("p.example", fmt.Sprint("k", k), 3, func(i int, m *spool.Message) {
				m.Fairness = fmt.Sprint("key-", k)
				m.URL += [...]string{"/ok", "/dead", "/flaky"}[i]
			})
		}
	}
	var d *Dispatcher
	if restart {
		add()
		d = startWith(t, q, pol, &http.Client{Transport: rc})
	} else {
		d = startWith(t, q, pol, &http.Client{Transport: rc})
		add()
	}
	most := 0
	for start := time.Now(); q.left() > 0; {
		if time.Since(start) > 5*time.Minute {
			t.Fatalf("%d webhooks still queued", q.left())
		}
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		d.mu.Lock()
		if h := d.hosts["p.example"]; h != nil {
			most = max(most, h.win.Lanes())
		}
		d.mu.Unlock()
	}
	time.Sleep(time.Minute) // anything sent again would come now
	synctest.Wait()
	if most > maxLanes {
		t.Errorf("the host held %d lanes, bound %d", most, maxLanes)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(tried) != 180 {
		t.Fatalf("%d distinct webhooks arrived, want 180", len(tried))
	}
	for path, n := range tried {
		want := 1
		if strings.HasSuffix(path, "/flaky") {
			want = 2
		}
		if n != want {
			t.Errorf("%s arrived %d times, want %d", path, n, want)
		}
	}
	if len(q.dead) != 60 {
		t.Errorf("%d dead letters, want 60", len(q.dead))
	}
}

// TestLanesBoundedStillFair: with room for 8 lanes and 30 keys with deep
// backlogs, the keys still take turns across all 30, and a new key's one
// webhook waits a few turns, not for the backlogs (457 arrivals without
// letting lanes go, 19 without taking new keys up first).
func TestLanesBoundedStillFair(t *testing.T) {
	old := maxLanes
	maxLanes = 8
	defer func() { maxLanes = old }()
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		_, q := setup(t, rc, map[string]Policy{"p.example": policy(10, 1, 1)}, 0)
		for k := range 30 {
			q.addLaned("p.example", fmt.Sprint("k", k), 20, fairKey(fmt.Sprintf("key-%02d", k)))
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		sent := len(rc.arrivals(""))
		q.addLaned("p.example", "late", 1, fairKey("zz-late"))
		waitEmpty(t, q, 10*time.Minute)
		got := tags(rc.arrivals(""))
		at := slices.Index(got, "late")
		// Taken up first as a lane frees (takeArrived), then one turn of
		// the keys in the rotation: a handful, not a round of all 30.
		if at < 0 || at-sent > 12 {
			t.Fatalf("the new key's webhook was arrival %d, %d after it came; want within a few turns", at, at-sent)
		}
		seen := map[string]int{}
		for _, a := range rc.arrivals("") {
			seen[a.path]++
		}
		if len(seen) != 601 || len(got) != 601 {
			t.Fatalf("%d arrivals of %d webhooks, want 601 once each", len(got), len(seen))
		}
	})
}
