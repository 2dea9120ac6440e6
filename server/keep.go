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
// keeps a connection only for a host that has come back and when the pool
// can hold it until the host is likely to need it again: a host sent to
// before, within the timeout, when the hosts sent to since (itself
// included) fit in total. A host new to the window has its first
// delivery's connection closed: nothing yet says it will come back within
// the timeout, and the pool would be filled, at the start of a round to
// tens of thousands of hosts, with total connections that are used once
// more at most (at 50,000 hosts in turn the default's 6,000 cost ~140 MiB
// at the peak for 6,000 reuses of 200,000 deliveries).
//
// So while the hosts in use fit the pool every connection is kept from a
// host's second delivery on (one handshake more a host than without
// keeper); beyond it, the pool holds no more than the hosts that come back
// soon enough to use it. total <= 0 keeps every connection.
//
// Nor is a kept connection held past its reach: once more than total
// distinct hosts have been sent to since the last delivery whose
// connection was kept, every host with an idle connection has had more
// than total others sent to since its last delivery. None of those
// connections would be kept after its next use, and an LRU pool through
// which every delivery went would have evicted them all. Then the pool's
// idle connections are closed at once, and their hosts no longer count as
// having one waiting: at 50,000 hosts sent to in turn, the first round's
// total of them (~24 KiB each) are not held for their idle timeout for one
// more use each. (A connection in flight at that moment goes back to the
// pool and times out there.)
//
// A delivery not kept goes through once, a transport without keep-alives,
// unless its host's previous one was kept: then it goes through pool, on
// the idle connection left for it, and closes it. pool itself never dials
// a connection it will not keep, since net/http's Transport remembers,
// per host, a request that found no idle connection until one is put back
// for that host: a host that never gets one would hold that memory for as
// long as the process runs.
type keeper struct {
	pool  idlePool
	once  http.RoundTripper
	total int
	now   func() time.Time

	mu    sync.Mutex
	hosts map[string]mark
	per   []int32 // hosts whose last delivery fell in second s, at per[s%len(per)]
	last  int64   // the newest second counted in per
	live  int     // hosts in the window: the sum of per
	swept int64   // when hosts was last rid of hosts out of the window
	// gen counts the kept deliveries: each starts a generation. since
	// counts the distinct hosts sent to, none kept, in the current one.
	// The idle connections of generations up to closed were closed.
	gen, closed uint64
	since       int
}

// idlePool is the transport whose idle connections keeper keeps.
type idlePool interface {
	http.RoundTripper
	CloseIdleConnections()
}

// mark is what keeper knows of a host: the second (Unix) of its last
// delivery, whether that delivery's connection was kept, and the
// generation it fell in.
type mark struct {
	sec  int64
	kept bool
	gen  uint64
}

// newKeeper sends deliveries through pool, a transport keeping total idle
// connections closed after timeout idle, or once, a transport without
// keep-alives; now is the clock (nil: time.Now).
func newKeeper(pool idlePool, once http.RoundTripper, total int, timeout time.Duration, now func() time.Time) *keeper {
	if now == nil {
		now = time.Now
	}
	slots := max(int((timeout+time.Second-1)/time.Second), 1)
	return &keeper{pool: pool, once: once, total: total, now: now, hosts: make(map[string]mark), per: make([]int32, slots)}
}

// RoundTrip sends req through pool when its connection is to be kept,
// else as keeper says.
func (k *keeper) RoundTrip(req *http.Request) (*http.Response, error) {
	if k.total <= 0 {
		return k.pool.RoundTrip(req)
	}
	keep, wasKept, unused := k.keep(req.URL.Host, k.now().Unix())
	if unused {
		k.pool.CloseIdleConnections()
	}
	switch {
	case keep:
		return k.pool.RoundTrip(req)
	case wasKept:
		r := req.WithContext(req.Context()) // a shallow copy: a RoundTripper must not change req
		r.Close = true
		return k.pool.RoundTrip(r)
	default:
		return k.once.RoundTrip(req)
	}
}

// keep records a delivery to host in second sec and reports whether its
// connection should be kept, whether the host's previous one was (an
// idle connection may be waiting for it), and whether the pool's idle
// connections are now all beyond use, to be closed.
func (k *keeper) keep(host string, sec int64) (keep, wasKept, unused bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	sec = max(sec, k.last) // a clock set back counts as still the newest second
	k.advance(sec)
	n := int64(len(k.per))
	prev, ok := k.hosts[host]
	if ok && prev.sec > sec-n {
		since := 0
		for s := prev.sec; s <= sec; s++ {
			since += int(k.per[s%n])
		}
		keep, wasKept = since <= k.total, prev.kept && prev.gen > k.closed
		k.per[prev.sec%n]--
		k.live--
	}
	switch {
	case keep:
		k.gen++
		k.since = 0
	case !ok || prev.gen != k.gen:
		k.since++ // first seen in this generation
		if k.since > k.total && k.closed < k.gen {
			// host's own idle connection, if any, goes with the rest
			k.closed, unused, wasKept = k.gen, true, false
		}
	}
	k.per[sec%n]++
	k.live++
	k.hosts[host] = mark{sec: sec, kept: keep, gen: k.gen}
	if sec-k.swept >= n {
		for h, m := range k.hosts {
			if m.sec <= sec-n {
				delete(k.hosts, h)
			}
		}
		k.swept = sec
	}
	return keep, wasKept, unused
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
