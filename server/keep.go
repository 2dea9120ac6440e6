package server

import (
	"net/http"
	"sync"
	"time"
)

// keeper decides, for each delivery, whether its connection is kept idle
// for the host's next delivery or closed once the answer is read.
//
// The transport's idle pool keeps at most total connections and evicts
// the least recently used one to make room: a host's connection survives
// until about total other hosts have been sent to after it. A host whose
// deliveries are further apart than that (thousands of hosts sent to in
// turn) finds its connection gone every time, and the pool is then full
// of connections that cost memory (two goroutines and their buffers each)
// and are never used again. keeper counts the distinct hosts sent to
// within the idle timeout, by the second of their last delivery, and
// keeps a connection only when the pool can hold it until its host is
// likely to need it again:
//   - a host sent to before, within the timeout: when the hosts sent to
//     since (itself included) fit in total;
//   - a host new to the window: when the hosts in the window fit in total.
//
// So while the hosts in use fit the pool every connection is kept, as
// without keeper; beyond it, the pool holds no more than the hosts that
// come back soon enough to use it. total <= 0 keeps every connection.
type keeper struct {
	next  http.RoundTripper
	total int
	now   func() time.Time

	mu    sync.Mutex
	hosts map[string]int64 // host -> the second (Unix) of its last delivery
	per   []int32          // hosts whose last delivery fell in second s, at per[s%len(per)]
	last  int64            // the newest second counted in per
	live  int              // hosts in the window: the sum of per
	swept int64            // when hosts was last rid of hosts out of the window
}

// newKeeper wraps next for a pool of total idle connections closed after
// timeout idle; now is the clock (nil: time.Now).
func newKeeper(next http.RoundTripper, total int, timeout time.Duration, now func() time.Time) *keeper {
	if now == nil {
		now = time.Now
	}
	slots := max(int((timeout+time.Second-1)/time.Second), 1)
	return &keeper{next: next, total: total, now: now, hosts: make(map[string]int64), per: make([]int32, slots)}
}

// RoundTrip sends req, on a request that asks for its connection to be
// closed after it when keeper decides not to keep it.
func (k *keeper) RoundTrip(req *http.Request) (*http.Response, error) {
	if k.total <= 0 || req.Close || k.keep(req.URL.Host, k.now().Unix()) {
		return k.next.RoundTrip(req)
	}
	r := req.WithContext(req.Context()) // a shallow copy: a RoundTripper must not change req
	r.Close = true
	return k.next.RoundTrip(r)
}

// keep records a delivery to host in second sec and reports whether its
// connection should be kept.
func (k *keeper) keep(host string, sec int64) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	sec = max(sec, k.last) // a clock set back counts as still the newest second
	k.advance(sec)
	n := int64(len(k.per))
	prev, ok := k.hosts[host]
	var keep bool
	if ok && prev > sec-n {
		since := 0
		for s := prev; s <= sec; s++ {
			since += int(k.per[s%n])
		}
		keep = since <= k.total
		k.per[prev%n]--
		k.live--
	} else {
		keep = k.live < k.total
	}
	k.per[sec%n]++
	k.live++
	k.hosts[host] = sec
	if sec-k.swept >= n {
		for h, s := range k.hosts {
			if s <= sec-n {
				delete(k.hosts, h)
			}
		}
		k.swept = sec
	}
	return keep
}

// advance moves the window to end at sec, dropping the seconds that left
// it. k.mu is held.
func (k *keeper) advance(sec int64) {
	if sec <= k.last {
		return
	}
	n := int64(len(k.per))
	from := max(k.last+1, sec-n+1)
	for s := from; s <= sec; s++ {
		k.live -= int(k.per[s%n])
		k.per[s%n] = 0
	}
	k.last = sec
}
