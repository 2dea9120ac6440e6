package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Issue 2 acceptance: 2,000 webhooks to a host at 200/s burst 20 all get
// 202, all arrive exactly once and byte-identical, and no 1-second window at
// the receiver holds more than 220.
func TestPacedExactlyOnce(t *testing.T) {
	rc := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 200/s, burst: 20, concurrency: 4}
`, rc.Host()))
	c := hp.Client()
	const n = 2000
	var wg sync.WaitGroup
	var accepted atomic.Int64
	sem := make(chan struct{}, 32)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			body := bytes.Repeat([]byte(fmt.Sprintf("%06d|", i)), 20)
			status, _ := hp.Post(c, fmt.Sprintf("%s/hook/%d?x=%d", rc.URL, i, i), body,
				http.Header{"Content-Type": {"application/json"}, "X-Event": {fmt.Sprint(i)}})
			if status == http.StatusAccepted {
				accepted.Add(1)
			} else {
				t.Errorf("webhook %d: status %d", i, status)
			}
		}()
	}
	wg.Wait()
	if accepted.Load() != n {
		t.Fatalf("%d of %d accepted", accepted.Load(), n)
	}
	rc.WaitFor(t, 60*time.Second, "2000 deliveries", func(as []Arrival) bool { return len(as) >= n })

	got := rc.Arrivals()
	if len(got) != n {
		t.Fatalf("%d arrivals, want exactly %d", len(got), n)
	}
	seen := map[string]bool{}
	for _, a := range got {
		if seen[a.Path] {
			t.Fatalf("%s arrived twice", a.Path)
		}
		seen[a.Path] = true
		var i int
		fmt.Sscanf(a.Header.Get("X-Event"), "%d", &i)
		want := bytes.Repeat([]byte(fmt.Sprintf("%06d|", i)), 20)
		if a.Path != fmt.Sprintf("/hook/%d?x=%d", i, i) || !bytes.Equal(a.Body, want) ||
			a.Header.Get("Content-Type") != "application/json" || a.Method != "POST" {
			t.Fatalf("webhook %d altered: %s %s %q", i, a.Method, a.Path, a.Body)
		}
		if a.Header.Get("Proxy-Connection") != "" || a.Header.Get("Proxy-Authorization") != "" {
			t.Fatalf("proxy headers forwarded: %v", a.Header)
		}
	}
	times := make([]time.Time, len(got))
	for i, a := range got {
		times[i] = a.At
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	if m := maxWindow(times, time.Second); m > 220 {
		t.Fatalf("%d arrivals in one second, want at most 20 + 200", m)
	}
	t.Logf("2000 webhooks: busiest second %d, first to last %v", maxWindow(times, time.Second), times[len(times)-1].Sub(times[0]))
}

func maxWindow(ts []time.Time, w time.Duration) int {
	best, j := 0, 0
	for i := range ts {
		for ts[i].Sub(ts[j]) >= w {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}
