// Package window owns what of each host's durable queue is held in
// memory: the lanes (fairness keys and priorities) and their turns, the
// webhooks staged to go next and the batches gathered from them, those
// waiting for a retry, max_age at the head, the ordering keys' and the
// delayed webhooks' ids, which lanes are read from the spool and from
// where, what is let go of when memory is short (spill, demote), and the
// selection of held webhooks for a purge or a burial.
//
// The spool is the queue; a Host is a read cache of one host's part of
// it. A Host is not safe for concurrent use: the dispatcher calls it with
// its own lock held, as it calls the host's gate. What a Host needs from
// outside (the memory shared by all hosts, running a spool read off the
// lock, being pumped again) comes through the Env given to New; a read
// it starts runs without the lock and its result is applied through the
// function Env.Read calls back with the lock held.
package window

import (
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// Reader is what a Host reads of the durable queue; *spool.Spool is one.
type Reader interface {
	// ReadLane reads, in id order, up to max webhooks of lane l of host's
	// queue with ids above after.
	ReadLane(host string, l spool.Lane, after uint64, max int) ([]*spool.Message, error)
	// Lanes lists host's lanes with webhooks queued, in key order.
	Lanes(host string) []spool.LaneUsage
	// Get reads back one queued webhook (spool.ErrNotQueued: it is not
	// queued any more).
	Get(host string, l spool.Lane, id uint64) (*spool.Message, error)
}

var _ Reader = (*spool.Spool)(nil)

// Env is what a Host asks of the dispatcher that holds it. Its methods
// are called with the dispatcher's lock held, from the Host's methods.
type Env interface {
	// Keep and Unkeep count m as held in memory and as no longer held
	// (it stays queued on disk, or left for good).
	Keep(m *spool.Message)
	Unkeep(m *spool.Message)
	// Fits reports whether m may be held now, within the memory shared by
	// all hosts; LoadSize is how many messages a read from the spool may
	// bring in now.
	Fits(m *spool.Message) bool
	LoadSize() int
	// Busy is how many of the host's messages are out of the Host: in
	// flight, a batch's members counted each.
	Busy() int
	// InFlight is how many of the host's requests are in flight (a batch
	// one): the dispatcher's own count, never its gate's.
	InFlight() int
	// Purged reports whether m, just read from the spool, was purged or
	// buried meanwhile: it is not held.
	Purged(m *spool.Message) bool
	// Read runs read off the lock (with the dispatcher's limit on reads
	// at once), then apply, as read returned it, with the lock held, and
	// then pumps the host. It reports false if no read can start (the
	// dispatcher is stopping).
	Read(read func() (apply func())) bool
	// Wake pumps the host at t.
	Wake(t time.Time)
}

// Policy is what a Host needs of its host's settings.
type Policy struct {
	// Window is how many of the host's messages may be in memory at once:
	// held here or out (Env.Busy).
	Window int
	// Stage is how many messages one request carries at most (1 without
	// batching): what is picked from the lanes ahead of sending.
	Stage int
	// Weights are the fairness keys' weights; MinShare the least share
	// of a key's turns its lower priorities get.
	Weights  map[string]int
	MinShare float64
	// MaxAge is how old a webhook may be when sent (0: no limit).
	MaxAge time.Duration
	// Batch, if not nil, gathers what is staged into batches (batch.go);
	// a batching host's webhooks are not let go of (spill).
	Batch *Batch
	// MaxLanes bounds the lanes held in memory (0: 4096).
	MaxLanes int
}

// Options configure a Host.
type Options struct {
	Name   string
	Reader Reader
	Env    Env
	Log    *slog.Logger
	Policy Policy
	// Now is the clock a read's result is applied at (nil: time.Now);
	// everything else is told the time by its caller.
	Now func() time.Time
	// Shared, if set, gives Reader, Log and Now (which are then not
	// read): one Shared for every Host of a dispatcher.
	Shared *Shared
}

// Shared is what the Hosts of one dispatcher read alike: the spool, the
// logger and the clock. Each Host points to one instead of carrying its
// own copy, which at tens of thousands of hosts is memory.
type Shared struct {
	reader Reader
	log    *slog.Logger
	now    func() time.Time

	// pols are the policies its Hosts point to, each stored once
	// however many hosts have it (see share).
	mu   sync.Mutex
	pols []*Policy
}

// maxShared bounds the policies a Shared keeps: a few per hosts key,
// reloads included. Past it, the list starts again (a host keeps the
// one it points to).
const maxShared = 64

// share returns the stored policy equal to p, storing p if there is
// none; a batching policy is not shared. The Policy a Host points to is
// never written: a change is a new one (SetPolicy).
func (sh *Shared) share(p *Policy) *Policy {
	if p.Batch != nil {
		return p // its Batch is the host's own: equal to no other
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for _, q := range sh.pols {
		if q.equal(p) {
			return q
		}
	}
	if len(sh.pols) >= maxShared {
		sh.pols = nil
	}
	sh.pols = append(sh.pols, p)
	return p
}

// equal reports whether p and q give a Host the same settings: equal
// values, equal weights, and the same Batch.
func (p *Policy) equal(q *Policy) bool {
	return p.Window == q.Window && p.Stage == q.Stage && p.MinShare == q.MinShare && p.MaxAge == q.MaxAge &&
		p.MaxLanes == q.MaxLanes && p.Batch == q.Batch && maps.Equal(p.Weights, q.Weights)
}

// NewShared returns the Shared of reader, log (nil: slog.Default()) and
// now (nil: time.Now).
func NewShared(reader Reader, log *slog.Logger, now func() time.Time) *Shared {
	if log == nil {
		log = slog.Default()
	}
	if now == nil {
		now = time.Now
	}
	return &Shared{reader: reader, log: log, now: now}
}

// Host is what of one host's queue is held in memory. Every host has
// one for as long as the dispatcher knows the host, idle or not: its
// size is what each of tens of thousands of hosts costs.
type Host struct {
	name string
	env  Env
	sh   *Shared
	pol  *Policy // shared with the other Hosts of sh that have it; never written

	lastSeen uint64 // highest id announced by the spool

	// inMemory is the rest; nil while the host rests (rest.go).
	*inMemory
}

// inMemory is what a Host holds while it is not at rest.
type inMemory struct {
	ready deque      // picked from the lanes, next to go
	retry retryQueue // failed, waiting for their backoff

	lanes laneSet

	// rare is what only batching hosts and hosts that let go of their
	// messages need: nil while neither (rareR gives the zero value).
	rare *hostRare

	onDisk  bool // the spool holds messages of a lane above its cursor
	loading bool // a read of lanes is under way
}

// hostRare is the part of a Host most hosts never use.
type hostRare struct {
	// fit caches what each staged webhook adds to a batch (-1: it goes
	// alone), for a batching host (batch.go).
	fit map[*spool.Message]int
	// spilled: h let go of its messages until then (spill.go), and reads
	// none before.
	spilled time.Time
}

var noHostRare hostRare // never written

func (h *Host) rareR() *hostRare {
	if h.rare == nil {
		return &noHostRare
	}
	return h.rare
}

func (h *Host) rareW() *hostRare {
	if h.rare == nil {
		h.rare = new(hostRare)
	}
	return h.rare
}

// fits is h's batch fit cache, nil if none (reads and deletes of a nil
// map are allowed).
func (h *Host) fits() map[*spool.Message]int { return h.rareR().fit }

// dropFits forgets what staged webhooks add to a batch.
func (h *Host) dropFits() {
	if h.rare != nil {
		h.rare.fit = nil
		h.tidyRare()
	}
}

// spilledUntil is when h may read again after letting go of what it
// held (zero: it may).
func (h *Host) spilledUntil() time.Time { return h.rareR().spilled }

func (h *Host) setSpilled(t time.Time) {
	if t.IsZero() && h.rare == nil {
		return
	}
	h.rareW().spilled = t
	h.tidyRare()
}

// tidyRare lets go of h.rare once it holds nothing.
func (h *Host) tidyRare() {
	if x := h.rare; x != nil && x.fit == nil && x.spilled.IsZero() {
		h.rare = nil
	}
}

// New returns the Host of o.Name, with its default lane read from the
// start.
func New(o Options) *Host {
	h := &Host{}
	h.Init(o)
	return h
}

// Init makes h, a zero Host (one held by value), the Host of o.Name, as
// New does.
func (h *Host) Init(o Options) {
	sh := o.Shared
	if sh == nil {
		sh = NewShared(o.Reader, o.Log, o.Now)
	}
	*h = Host{name: o.Name, env: o.Env, sh: sh, inMemory: &inMemory{}}
	h.SetPolicy(o.Policy)
	h.newLanes()
}

// SetPolicy applies the host's settings (a reload).
func (h *Host) SetPolicy(p Policy) {
	p.Window = max(p.Window, 1)
	p.Stage = max(p.Stage, 1)
	if p.MaxLanes <= 0 {
		p.MaxLanes = defaultMaxLanes
	}
	h.pol = h.sh.share(&p)
	if h.inMemory == nil {
		return // what follows is as a new Host's: woken with p's weights
	}
	if h.lanes.def != nil {
		h.lanes.reweigh(p.Weights)
	}
	if p.Batch == nil {
		h.retry.unbatch() // each member retries alone
	}
	h.dropFits()              // what a webhook adds to a batch depends on the policy
	h.setSpilled(time.Time{}) // the gate may let it send sooner
}

// Held is how many messages h holds in memory: staged, in lanes or
// waiting for a retry.
func (h *Host) Held() int {
	if h.inMemory == nil {
		return 0
	}
	return h.Waiting() + h.retry.Len()
}

// Waiting is how many of the messages h holds wait for their turn:
// staged or in lanes.
func (h *Host) Waiting() int {
	if h.inMemory == nil {
		return 0
	}
	return h.ready.Len() + h.lanes.mem
}

// count is how many of the host's messages are in memory, out or not,
// or being read back as ids (an ordering key's next, a delay that is
// due). A read of lanes is not counted: its size was bounded by the room
// when it started (LoadSize), and what is announced meanwhile for a lane
// being read waits on disk.
func (h *Host) count() int {
	if h.inMemory == nil {
		return h.env.Busy()
	}
	return h.Held() + h.lanes.r().reading + h.env.Busy()
}

// Room is how many more messages the host's window has room for.
func (h *Host) Room() int { return h.pol.Window - h.count() }

// Settled reports whether h has nothing to remember beyond what a new
// Host would: nothing held, on disk unread, being read or waiting as an
// id.
func (h *Host) Settled() bool {
	return h.inMemory == nil || h.Held() == 0 && !h.onDisk && !h.loading && !h.lanes.waiting()
}

// Lanes is how many lanes h holds, the default one included.
func (h *Host) Lanes() int {
	if h.inMemory == nil {
		return 1
	}
	return h.lanes.count()
}

// Announce takes a message the spool announced as durable.
func (h *Host) Announce(m *spool.Message, now time.Time) {
	h.wake()
	h.enqueueLane(m, now)
}

// Resume marks h's queue as on disk, at a start: its default lane and
// every other lane the spool has.
func (h *Host) Resume() {
	h.wake()
	h.resume()
}

// Unstage puts what is staged back at the front of its lanes, to be
// picked again with whatever came since (a pause ended), and gathered
// again from scratch.
func (h *Host) Unstage() {
	h.wake()
	h.unstage()
	h.dropFits()
}

// Done notes that m left for good (delivered, dead, purged, or abandoned
// where it stays queued for the next start): its ordering key moves on,
// and its lane no longer counts it as out.
func (h *Host) Done(m *spool.Message) {
	h.wake()
	if m.Ordering != "" {
		h.orderDone(m)
	}
	h.settle(m)
}

// OrderedDead reports that m became a dead letter: a webhook of an
// ordering key is counted and logged (the key goes on without it).
func (h *Host) OrderedDead(m *spool.Message, reason string) {
	h.wake()
	h.orderedDead(m, reason)
}

// Upkeep keeps h's window after a pump: it reads back what is due of the
// delayed, lets go of what h holds when the host can't send before
// spillUntil (zero: it can; a spill waits for mayLetGo), makes room for
// keys waiting on disk, and tops the window up from the spool. It
// returns when h needs the host pumped again (zero: an event will): a
// retry due, a read allowed again, the head reaching max_age.
func (h *Host) Upkeep(now, spillUntil time.Time, mayLetGo bool) time.Time {
	h.wake()
	wake := h.dueDelayed(now)
	if !spillUntil.IsZero() && mayLetGo {
		h.spill(now, spillUntil)
	}
	h.demote()
	h.takeArrived()
	if h.mayLoad(now) {
		h.loadLanes()
		h.rediscover()
	}
	if !h.mayLoad(now) && (h.onDisk || h.lanes.r().untracked) {
		wake = earliest(wake, h.spilledUntil()) // then it reads again
	}
	if at, ok := h.retry.PeekAt(); ok && at.After(now) {
		wake = earliest(wake, at)
	}
	if h.Settled() && h.env.Busy() == 0 {
		h.compact()
	}
	return h.headExpiry(wake)
}

// compact gives back the buffers of a host that holds nothing: a host
// that was busy once costs, idle, what a new one does.
func (h *Host) compact() {
	h.ready = deque{}
	h.retry = retryQueue{}
	h.dropFits()
	ls := &h.lanes
	ls.def.q = deque{}
	if ls.ring.len() == 0 {
		ls.ring = fifo[*unit]{}
	}
	if ls.loadQ.len() == 0 {
		ls.loadQ = fifo[*lane]{}
	}
	if len(ls.lanes) == 0 {
		ls.lanes = nil
	}
	if len(ls.units) == 0 {
		ls.units = nil
	}
	if len(ls.outs) == 0 {
		ls.outs = nil
	}
	if x := ls.rare; x != nil {
		if len(x.order) == 0 {
			x.order = nil
		}
		if len(x.back) == 0 {
			x.back = nil
		}
		if x.delayed.Len() == 0 {
			x.delayed = nil
		}
		if len(x.demote) == 0 {
			x.demote = nil
		}
		if !x.capped && ls.count() < h.pol.MaxLanes/2 {
			x.settled, x.settledAt = nil, 0
		}
		if x.idle() {
			ls.rare = nil
		}
	}
}

// earliest is the sooner of two wake times (zero: none).
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

// Loading reports whether a read of h's lanes is under way; OnDisk
// whether the spool holds more of them than h has read.
func (h *Host) Loading() bool { return h.inMemory != nil && h.loading }
func (h *Host) OnDisk() bool  { return h.inMemory != nil && h.onDisk }

// Unspill lets h read again at once if it let go of what it held: the
// host's gate may let it send sooner than it said.
func (h *Host) Unspill() {
	if h.inMemory != nil {
		h.setSpilled(time.Time{})
	}
}
