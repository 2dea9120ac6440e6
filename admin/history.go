package admin

import (
	"context"
	"sync"
	"time"

	"github.com/hookpace/hookpace/deliver"
)

// The status page's history: what the spool and each host did over the
// last 15 minutes, kept in memory in ring buffers, so that an operator can
// tell a backlog that drains from one that grows without Prometheus. One
// sampler (History.Run, started with the app) reads once a second what the
// page and the metrics already know: the spool's webhooks accepted,
// delivered and queued every second, and every 10 s each host's queue and
// deliveries. A host the dispatcher forgets loses its history with it.

const (
	// HistorySpan is how far back the history goes.
	HistorySpan = 15 * time.Minute
	// HostStep is the time between two samples of a host.
	HostStep = 10 * time.Second

	spoolSlots = int(HistorySpan / time.Second) // 900
	hostSlots  = int(HistorySpan / HostStep)    // 90
)

// HistorySource is what the sampler reads. Accepted and Delivered count
// since the start (webhooks accepted into the spool by the proxy, webhooks
// delivered), Queued is the spool's depth now, Hosts every host the
// dispatcher knows (its Queued and Delivered are read: the gauges, not a
// full status, since every host is read every HostStep).
type HistorySource struct {
	Accepted  func() int64
	Delivered func() int64
	Queued    func() int64
	Hosts     func() []deliver.HostGauge
}

// ring keeps the last len(v) samples, oldest overwritten first.
type ring[T any] struct {
	v    []T
	next int // where the next sample goes
	n    int // samples held, up to len(v)
}

func newRing[T any](size int) ring[T] { return ring[T]{v: make([]T, size)} }

func (r *ring[T]) push(x T) {
	r.v[r.next] = x
	r.next = (r.next + 1) % len(r.v)
	r.n = min(r.n+1, len(r.v))
}

// appendTo appends the samples held, oldest first.
func (r *ring[T]) appendTo(out []T) []T {
	if r.n < len(r.v) {
		return append(out, r.v[:r.n]...)
	}
	return append(append(out, r.v[r.next:]...), r.v[:r.next]...)
}

// hostHistory is one host's: its queue depth at each sample and the
// webhooks delivered in the 10 s before it, as small integers (a depth or
// count above 65,535 is kept as 65,535), and what the map and the counter
// take. Its ring grows with the samples taken, to 90 x 4 bytes after
// 15 minutes, so that tens of thousands of hosts seen for a minute or two
// cost what they recorded.
type hostHistory struct {
	samples hostRing
	prev    int64 // the host's Delivered at the last sample
	seen    int64 // the sample round that last saw the host
}

// hostRing keeps a host's last hostSlots samples, each a depth and a
// count (depth<<16 | count), oldest overwritten first once full; until
// then v holds them in order and grows as they come.
type hostRing struct {
	v    []uint32
	next int // once full, where the next sample goes
}

func (r *hostRing) push(queued, delivered uint16) {
	x := uint32(queued)<<16 | uint32(delivered)
	if len(r.v) < hostSlots {
		if len(r.v) == cap(r.v) {
			v := make([]uint32, len(r.v), min(max(2*cap(r.v), 4), hostSlots))
			copy(v, r.v)
			r.v = v
		}
		r.v = append(r.v, x)
		return
	}
	r.v[r.next] = x
	r.next = (r.next + 1) % hostSlots
}

func (r *hostRing) len() int { return len(r.v) }

// appendTo appends the depths and the counts held, oldest first.
func (r *hostRing) appendTo(queued, delivered []uint16) ([]uint16, []uint16) {
	for i := range r.v {
		x := r.v[(r.next+i)%len(r.v)]
		queued, delivered = append(queued, uint16(x>>16)), append(delivered, uint16(x))
	}
	return queued, delivered
}

// History holds the samples. Its methods are safe for concurrent use.
type History struct {
	src HistorySource

	mu                      sync.Mutex
	accepted, delivered     ring[int64] // per second
	queued                  ring[int64] // at each second
	prevAccepted, prevDeliv int64
	slot                    int64 // the second last sampled (Unix); 0: none yet
	hostSlot                int64 // the 10 s step last sampled
	round                   int64
	hosts                   map[string]*hostHistory
}

// NewHistory returns an empty history fed from src.
func NewHistory(src HistorySource) *History {
	return &History{src: src, accepted: newRing[int64](spoolSlots), delivered: newRing[int64](spoolSlots),
		queued: newRing[int64](spoolSlots), hosts: make(map[string]*hostHistory)}
}

// Run samples every second until ctx ends.
func (h *History) Run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	h.Sample(time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			h.Sample(now)
		}
	}
}

// Sample takes the samples due at now: the spool's, once for each second
// since the last (a second missed gets the average of the gap), and the
// hosts' at each 10 s step. A call within the second of the previous one
// does nothing.
func (h *History) Sample(now time.Time) {
	slot := now.Unix()
	h.mu.Lock()
	defer h.mu.Unlock()
	if slot <= h.slot {
		return
	}
	acc, del, q := h.src.Accepted(), h.src.Delivered(), h.src.Queued()
	if h.slot != 0 {
		steps := int(min(slot-h.slot, int64(spoolSlots)))
		spread(&h.accepted, max(acc-h.prevAccepted, 0), steps)
		spread(&h.delivered, max(del-h.prevDeliv, 0), steps)
		for range steps {
			h.queued.push(q)
		}
	}
	h.slot, h.prevAccepted, h.prevDeliv = slot, acc, del
	if step := slot / int64(HostStep/time.Second); step > h.hostSlot {
		h.sampleHosts(int(min(step-h.hostSlot, int64(hostSlots))))
		h.hostSlot = step
	}
}

// spread pushes total over steps samples, the remainder on the last.
func spread(r *ring[int64], total int64, steps int) {
	each := total / int64(steps)
	for i := range steps {
		if i == steps-1 {
			each = total - each*int64(steps-1)
		}
		r.push(each)
	}
}

// sampleHosts takes one sample of every host (steps of them for a host
// that was there before: a step missed repeats the depth and shares out
// the deliveries), and drops the history of hosts the dispatcher no
// longer knows. h.mu is held.
func (h *History) sampleHosts(steps int) {
	h.round++
	for _, st := range h.src.Hosts() {
		hh := h.hosts[st.Host]
		n := steps
		if hh == nil {
			hh = &hostHistory{}
			h.hosts[st.Host] = hh
			n = 1 // new: what it delivered so far was since the last step
		}
		d := st.Delivered - hh.prev
		if d < 0 {
			d = st.Delivered // forgotten and taken up again in between
		}
		hh.prev, hh.seen = st.Delivered, h.round
		for i := range n {
			each := d / int64(n)
			if i == n-1 {
				each = d - each*int64(n-1)
			}
			hh.samples.push(small(st.Queued), small(each))
		}
	}
	for name, hh := range h.hosts {
		if hh.seen != h.round {
			delete(h.hosts, name)
		}
	}
}

func small(n int64) uint16 { return uint16(min(max(n, 0), 65535)) }

// SpoolHistory is the spool's samples, oldest first, one a second.
type SpoolHistory struct {
	Accepted, Delivered, Queued []int64
}

// Spool returns the spool's samples.
func (h *History) Spool() SpoolHistory {
	h.mu.Lock()
	defer h.mu.Unlock()
	return SpoolHistory{Accepted: h.accepted.appendTo(nil), Delivered: h.delivered.appendTo(nil), Queued: h.queued.appendTo(nil)}
}

// HostHistory is one host's samples, oldest first, one every HostStep.
type HostHistory struct {
	Queued, Delivered []uint16
}

// Host returns host's samples; ok is false without any.
func (h *History) Host(host string) (HostHistory, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hh := h.hosts[host]
	if hh == nil {
		return HostHistory{}, false
	}
	q, d := hh.samples.appendTo(nil, nil)
	return HostHistory{Queued: q, Delivered: d}, true
}

// Hosts counts the hosts with a history.
func (h *History) Hosts() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.hosts)
}
