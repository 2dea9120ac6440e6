package fleet

import (
	"hash/fnv"
	"slices"
	"strconv"
	"sync"
	"time"
)

// A replica is a witness of what Redis held for the hosts it asks about.
// Redis may lose that state (a restart without persistence, a flush, an
// eviction) or go back in time (a failover to a replica that missed the
// last writes, one Cluster master's slots at a time); the bucket would
// then start full and the leases of attempts in flight would be
// forgotten, so the partner would see one more burst than the fleet
// promises. So each host's state carries a version (v in its hash,
// raised by every write, and recorded as the writer's mark), and each
// replica remembers, per host it asked about recently:
//
//   - the version of its own last write: a mark in Redis below it tells
//     the script that the state was lost (or went back), whatever other
//     replicas wrote since;
//   - the bucket's debt (µs ahead) in its last answer and when that ask
//     was sent: the debt now is at least that much less the time since,
//     which the script restores when the state was lost (each replica
//     that remembers more raises it to its own floor; none lowers it);
//   - its own leases that are still live (granted, kept or renewed within
//     a lease period, not released): the script counts as many as taken,
//     until their period ends, when the state was lost.
//
// A host no replica remembers is new: its bucket starts full, as before.
//
// Besides, while a replica paced alone (Redis down) for D, its share may
// have sent up to rate·D that Redis never heard of; for a host it was
// sending to, its asks in the D after Redis answers again charge the
// bucket at least min(D, its capacity) of debt, less the time since, so
// that the shares' sends and a full bucket do not add up to a burst.

// recallFor is how long a replica remembers a host it stopped asking
// about, and its last write of it. The script writes a host's state with
// a TTL of an hour or more, so within this time of a write a state Redis
// does not hold was lost, not expired.
const recallFor = 10 * time.Minute

// recalled is what one replica remembers of one host.
type recalled struct {
	v       int64     // the state's version at this replica's last write
	ahead   int64     // µs: the bucket's debt in the last answer ...
	askedAt time.Time // ... to the ask sent then
	seenAt  time.Time // the last answer (or ask, while Redis is away)
	wroteAt time.Time // this replica last wrote the state
	leases  map[string]time.Time
}

// recall is a replica's memory of the hosts it asked about.
type recall struct {
	mu    sync.Mutex
	hosts map[string]*recalled
	swept time.Time
	// On a Cluster, the same per slot (slots.go): since when each down
	// slot is down, and when those that answer again came back.
	slotDown  map[uint16]time.Time
	slotUp    map[int]outage
	downSince time.Time     // Redis stopped answering (zero: it answers)
	upAt      time.Time     // it answered again ...
	down      time.Duration // ... after this long
	lost      int           // hosts whose state was restored
	lostAt    time.Time
}

// memory is what an ask for host passes to the script: the version
// expected, the bucket's floor should the state be lost, the outage to
// charge (its length and the time since it ended, µs) and the live
// leases not released by this ask.
type memory struct {
	v, floor, down, since, leases int64
}

func (r *recall) entry(host string, now time.Time) *recalled {
	if r.hosts == nil {
		r.hosts = make(map[string]*recalled)
	}
	e := r.hosts[host]
	if e == nil {
		e = &recalled{seenAt: now}
		r.hosts[host] = e
	}
	return e
}

// before is what req's ask passes, sent at now; slot is its host's
// Cluster slot (-1: not on a Cluster).
func (r *recall) before(req Request, now time.Time, slot int) memory {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.hosts[req.Host]
	if e == nil || now.Sub(e.seenAt) > recallFor {
		return memory{}
	}
	m := memory{floor: max(e.ahead-now.Sub(e.askedAt).Microseconds(), 0)}
	if now.Sub(e.wroteAt) <= recallFor {
		m.v = e.v
	}
	if !r.upAt.IsZero() && now.Sub(r.upAt) < r.down {
		m.down, m.since = r.down.Microseconds(), now.Sub(r.upAt).Microseconds()
	}
	if o, ok := r.slotUp[slot]; ok && slot >= 0 && now.Sub(o.at) < o.down {
		m.down, m.since = max(m.down, o.down.Microseconds()), now.Sub(o.at).Microseconds()
	}
	m.leases = int64(len(e.live(req, now)))
	return m
}

// after records the answer to req, sent at askedAt and answered at now:
// the version and debt it reported, the leases it granted, released or
// kept. When the state was found lost, it returns the ids of the live
// leases that the ask counted under stand-in ids.
func (r *recall) after(req Request, g Grant, a answer, askedAt, now time.Time, period time.Duration) (restore []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entry(req.Host, now)
	if a.lost {
		restore = e.live(req, askedAt)
	}
	e.v, e.ahead, e.askedAt, e.seenAt = max(e.v, a.v), a.ahead, askedAt, now
	if a.wrote {
		e.wroteAt = askedAt
	}
	if e.leases == nil && (len(g.Leases) > 0 || len(g.Registered) > 0 || len(req.Releases) > 0) {
		e.leases = make(map[string]time.Time)
	}
	for _, rel := range req.Releases {
		if rel.Keep {
			e.leases[rel.Lease] = now.Add(period)
		} else {
			delete(e.leases, rel.Lease)
		}
	}
	for _, id := range slices.Concat(g.Leases, g.Registered) {
		e.leases[id] = now.Add(period)
	}
	if a.lost {
		r.lost++
		r.lostAt = now
	}
	r.sweep(now)
	return restore
}

// live is e's leases live at now and not released by req.
func (e *recalled) live(req Request, now time.Time) []string {
	var ids []string
	for id, until := range e.leases {
		if now.Before(until) && !slices.ContainsFunc(req.Releases, func(r Release) bool { return r.Lease == id }) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// touch records asks that Redis did not answer, at now: their hosts are
// being sent to.
func (r *recall) touch(hosts []string, now time.Time) {
	if len(hosts) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range hosts {
		r.entry(h, now).seenAt = now
	}
}

// renewed records leases renewed at now.
func (r *recall) renewed(host string, leases []string, now time.Time, period time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.hosts[host]
	if e == nil || e.leases == nil {
		return
	}
	for _, id := range leases {
		if _, ok := e.leases[id]; ok {
			e.leases[id] = now.Add(period)
		}
	}
}

// version is the version a renewal of host's leases expects.
func (r *recall) version(host string, now time.Time) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.hosts[host]; e != nil && now.Sub(e.wroteAt) <= recallFor {
		return e.v
	}
	return 0
}

// sweep forgets, once a minute, the hosts not asked about for recallFor
// and the leases past their period.
func (r *recall) sweep(now time.Time) {
	if now.Sub(r.swept) < time.Minute {
		return
	}
	r.swept = now
	for h, e := range r.hosts {
		for id, until := range e.leases {
			if !now.Before(until) {
				delete(e.leases, id)
			}
		}
		if now.Sub(e.seenAt) > recallFor {
			delete(r.hosts, h)
		}
	}
	for s, o := range r.slotUp {
		if now.Sub(o.at) >= o.down {
			delete(r.slotUp, s)
		}
	}
}

// failed records that Redis did not answer at now.
func (r *recall) failed(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.downSince.IsZero() {
		r.downSince = now
	}
}

// answered records that Redis answers again at now.
func (r *recall) answered(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.downSince.IsZero() {
		return
	}
	r.upAt, r.down, r.downSince = now, now.Sub(r.downSince), time.Time{}
}

// outage is a slot's: it answered again at, after down.
type outage struct {
	at   time.Time
	down time.Duration
}

// slotsFailed records that Cluster slots stopped answering at now.
func (r *recall) slotsFailed(slots []uint16, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.slotDown == nil {
		r.slotDown = make(map[uint16]time.Time)
	}
	for _, s := range slots {
		if _, ok := r.slotDown[s]; !ok {
			r.slotDown[s] = now
		}
	}
}

// slotsAnswered records that Cluster slots answer again at now: the asks
// of their hosts charge the outage (see before).
func (r *recall) slotsAnswered(slots []uint16, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.slotUp == nil {
		r.slotUp = make(map[int]outage)
	}
	for _, s := range slots {
		if since, ok := r.slotDown[s]; ok {
			r.slotUp[int(s)] = outage{at: now, down: now.Sub(since)}
			delete(r.slotDown, s)
		}
	}
}

// Lost reports how many times this replica found a host's state lost or
// gone back in Redis (and restored it from what it remembered), and when
// it last did.
func (l *Limiter) Lost() (n int, last time.Time) {
	l.recall.mu.Lock()
	defer l.recall.mu.Unlock()
	return l.recall.lost, l.recall.lostAt
}

func i64(n int64) string { return strconv.FormatInt(n, 10) }

// markOf is a replica's mark in each host's state: 32 bits of FNV-1a of
// its name, in base 36, so that a hundred replicas' marks take ~3 KiB of
// a host's state rather than ~6 (two replicas with one mark would each
// miss a loss that the other wrote over: one chance in 4·10⁹ a pair).
func markOf(replica string) string {
	h := fnv.New32a()
	h.Write([]byte(replica))
	return strconv.FormatUint(uint64(h.Sum32()), 36)
}

// logLost says, once a lease period at most, that Redis lost the state of
// hosts and that this replica restored what it remembered.
func (l *Limiter) logLost(hosts []string) {
	now := l.now()
	l.mu.Lock()
	quiet := !l.lostLog.IsZero() && now.Sub(l.lostLog) < l.opts.LeasePeriod
	if !quiet {
		l.lostLog = now
	}
	l.mu.Unlock()
	if !quiet {
		l.log.Warn("fleet state lost in redis: restored this replica's recent debt and leases (no burst)",
			"host", hosts[0], "hosts", len(hosts))
	}
}
