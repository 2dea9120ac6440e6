package spool

import (
	"cmp"
	"slices"
)

// hostLanes counts what a host has queued per lane and per fairness key
// (over its priorities): what the dispatcher serves in turn and what
// admission per key reads. Lane{} is counted in plain, so that a host
// without lanes, the common case, costs no map; hosts with nothing queued
// and lanes with nothing queued are absent, so the counts take memory in
// proportion to the lanes that have work.
type hostLanes struct {
	plain int            // in Lane{}
	lanes map[Lane]int   // in every other lane
	keys  map[string]int // in every other lane, by fairness key
}

// laned counts n more messages (n may be negative) queued in lane ln of
// host's. Its callers are the ops' settle (once a write is durable) and
// load: the counts are of webhooks queued on disk, not of reservations.
func (l *ledger) laned(host string, ln Lane, n int) {
	h := l.lanes[host]
	if h == nil {
		if n <= 0 {
			return
		}
		h = &hostLanes{}
		l.lanes[host] = h
	}
	if ln == (Lane{}) {
		h.plain = max(h.plain+n, 0)
	} else {
		if h.lanes == nil {
			h.lanes, h.keys = make(map[Lane]int), make(map[string]int)
		}
		if h.lanes[ln] += n; h.lanes[ln] <= 0 {
			delete(h.lanes, ln)
		}
		if h.keys[ln.Key] += n; h.keys[ln.Key] <= 0 {
			delete(h.keys, ln.Key)
		}
	}
	if h.plain == 0 && len(h.lanes) == 0 {
		delete(l.lanes, host)
	}
}

// Lanes returns host's lanes that have webhooks queued, with how many,
// sorted by fairness key, then by priority rank (high first). It reads
// memory only. The counts are of webhooks whose write is durable: an
// append still being written is not counted yet, and a delivered webhook
// is counted until its removal is.
func (s *Spool) Lanes(host string) []LaneUsage {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.ledger.lanes[host]
	if h == nil {
		return nil
	}
	out := make([]LaneUsage, 0, len(h.lanes)+1)
	if h.plain > 0 {
		out = append(out, LaneUsage{Queued: h.plain})
	}
	for ln, n := range h.lanes {
		out = append(out, LaneUsage{Lane: ln, Queued: n})
	}
	slices.SortFunc(out, func(a, b LaneUsage) int { return compareLanes(a.Lane, b.Lane) })
	return out
}

// compareLanes orders lanes by fairness key, then priority rank: the order
// of their keys in the queue database, but for Lane{} (the queue key),
// which sorts with the other lanes of key "".
func compareLanes(a, b Lane) int {
	return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Priority.Rank(), b.Priority.Rank()))
}

// KeyQueued returns how many webhooks are queued for host with fairness
// key key, over all priorities, and how many distinct fairness keys
// (counting "", webhooks without one) have webhooks queued for host. It
// takes the spool's mutex and two map reads, for admission per key on
// every ingest. Counts are as Lanes's.
func (s *Spool) KeyQueued(host, key string) (queued, keys int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.ledger.lanes[host]
	if h == nil {
		return 0, 0
	}
	queued, keys = h.keys[key], len(h.keys)
	if h.plain > 0 {
		if key == "" {
			queued += h.plain
		}
		if h.keys[""] == 0 {
			keys++ // "" has webhooks in Lane{} only
		}
	}
	return queued, keys
}
