package deliver

// What the dispatcher holds in memory. MaxBuffered bounds the
// messages held over all hosts, counted with what a decoded message costs
// besides its body, and the bound holds for the total: a host reads from
// the spool only what fits in its share (an equal part for each host the
// dispatcher knows) and in what is left overall. So that every host still
// moves when thousands share the bound, a host with nothing ready may
// always read one request's worth (one webhook, or a batch). Spool reads
// run a few at a time, so that thousands of hosts starting at once (a
// restart with a backlog) don't each hold a read's buffers together.

import (
	"github.com/hookpace/hookpace/spool"
	"github.com/hookpace/hookpace/window"
)

// msgOverhead is what a decoded message costs besides its body: the
// struct, its header map and strings (about 820 bytes measured with three
// headers), rounded up.
const msgOverhead = 1 << 10

// maxLoads is how many spool reads run at once.
const maxLoads = 4

// cost is what m counts against MaxBuffered.
func cost(m *spool.Message) int64 { return int64(len(m.Body)) + msgOverhead }

// keep counts m, now held in memory for h.
func (d *Dispatcher) keep(h *host, m *spool.Message) {
	c := cost(m)
	d.buffered += c
	d.bufferedN++
	h.buffered += c
}

// release counts m, no longer held in memory for h: it left for good.
func (d *Dispatcher) release(h *host, m *spool.Message) {
	d.unkeep(h, m)
	h.win.Done(m)
}

// unkeep counts m, no longer held in memory for h, where it stays queued
// (window.Host.Upkeep: spill, demote) or has left (release).
func (d *Dispatcher) unkeep(h *host, m *spool.Message) {
	c := cost(m)
	d.buffered -= c
	d.bufferedN--
	h.buffered -= c
}

// grew counts n more bytes of a message h holds (coalescing replaced its
// content).
func (d *Dispatcher) grew(h *host, n int64) {
	d.buffered += n
	h.buffered += n
}

// share is what one host may hold: an equal part of MaxBuffered.
func (d *Dispatcher) share() int64 {
	return d.opts.MaxBuffered / int64(max(len(d.hosts), 1))
}

// fits reports whether m may be held for h on its arrival.
func (d *Dispatcher) fits(h *host, m *spool.Message) bool {
	c := cost(m)
	return d.buffered+c <= d.opts.MaxBuffered && h.buffered+c <= d.share()
}

// loadSize is how many messages h may read from the spool now: what its
// window has room for, within its share and what is left of MaxBuffered,
// at the messages' average cost; at least one request's worth when it has
// nothing ready.
func (d *Dispatcher) loadSize(h *host) int {
	n := h.win.Room()
	avg := int64(msgOverhead + 1<<10) // a guess until something is held
	if d.bufferedN > 0 {
		avg = max(d.buffered/d.bufferedN, msgOverhead)
	}
	room := max(min(d.share()-h.buffered, d.opts.MaxBuffered-d.buffered), 0)
	fit := int(min(room/avg, int64(n)))
	if h.win.Waiting() == 0 {
		fit = max(fit, h.pol.Batch.events())
	}
	return min(n, fit)
}

// window is how many of a host's messages may be in memory at once (ready,
// retrying or in flight): enough to keep its slots busy, small enough that
// thousands of hosts with backlogs stay cheap.
func (h *host) window() int {
	l := h.pol.Limits
	w := min(max(32, 2*l.Concurrency+l.Burst), 1024)
	if b := h.pol.Batch; b != nil {
		// Room for a full batch per slot and one more being gathered.
		w = max(w, min(b.MaxEvents*(l.Concurrency+1), 4096))
	}
	return w
}

// maxLanes bounds the lanes a host keeps in memory (a var for tests).
var maxLanes = 4096

// windowPolicy is what h's window needs of its policy.
func (h *host) windowPolicy() window.Policy {
	return window.Policy{Window: h.window(), Stage: h.pol.Batch.events(), Weights: h.pol.Weights,
		MinShare: h.pol.MinShare, MaxAge: h.pol.MaxAge, Batch: h.pol.Batch.window(), MaxLanes: maxLanes}
}
