package window

// What operators see of a host's lanes: its busiest fairness keys, what
// it has queued per priority, and the ordering keys that are blocked and
// on what. The counts come from the spool's memory (Reader.Lanes) and the
// Host's.

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// busiestShown and blockedShown bound the keys a host's status names.
const (
	busiestShown = 5
	blockedShown = 5
)

// LaneStatus is what a host in lanes holds: its fairness keys with
// webhooks in memory, its ordering keys with one active, the webhooks
// parked behind them and those delayed, what is queued per priority, the
// busiest fairness keys, the blocked ordering keys, and the dead letters
// of ordered keys since the host was taken up (the last one's key and
// why).
type LaneStatus struct {
	Keys         int            `json:"keys"`
	OrderingKeys int            `json:"ordering_keys"`
	Parked       int            `json:"parked"`
	Delayed      int            `json:"delayed"`
	Priorities   map[string]int `json:"queued_by_priority,omitempty"`
	Busiest      []KeyStatus    `json:"busiest_keys,omitempty"`
	Blocked      []BlockedKey   `json:"blocked_ordering_keys,omitempty"`
	OrderedDead  int64          `json:"ordered_dead"`
	LastDeadKey  string         `json:"last_ordered_dead_key,omitempty"`
	LastDeadWhy  string         `json:"last_ordered_dead_reason,omitempty"`
}

// KeyStatus is one fairness key's backlog; Oldest only in one host's
// status (GET /v1/hosts/{host}).
type KeyStatus struct {
	Key    string     `json:"key"`
	Queued int        `json:"queued"`
	Oldest *time.Time `json:"oldest,omitempty"`
}

// BlockedKey is an ordering key whose next webhooks wait for its active
// one: how many wait, and the active one's id, state and last answer.
type BlockedKey struct {
	Key        string     `json:"ordering_key"`
	Fairness   string     `json:"fairness_key,omitempty"`
	Waiting    int        `json:"waiting"`
	On         string     `json:"blocked_on"`
	State      string     `json:"state"` // retrying, delayed, or next (queued, staged or being sent)
	Attempts   int        `json:"attempts,omitempty"`
	LastStatus int        `json:"last_status,omitempty"`
	LastError  string     `json:"last_error,omitempty"`
	NextAt     *time.Time `json:"next_at,omitempty"`
}

// Text is the lanes in a few words ("" for nil or nothing to say), for
// the status page and `hookpace status`: "keys bulk 3,000, small 2;
// priority high 1, low 3,000; order-42 blocked on 0000000000000007
// (retrying, attempt 3: status 503), 5 waiting; 1 dead letter in ordered
// keys (last order-9: ...)".
func (s *LaneStatus) Text() string {
	if s == nil {
		return ""
	}
	var parts []string
	if len(s.Busiest) > 0 {
		keys := make([]string, len(s.Busiest))
		for i, k := range s.Busiest {
			keys[i] = fmt.Sprintf("%s %d", cmp.Or(k.Key, `""`), k.Queued)
		}
		parts = append(parts, "keys "+strings.Join(keys, ", "))
	}
	if len(s.Priorities) > 1 || s.Priorities["normal"] == 0 && len(s.Priorities) > 0 {
		var ps []string
		for _, p := range []string{"high", "normal", "low"} {
			if n := s.Priorities[p]; n > 0 {
				ps = append(ps, fmt.Sprintf("%s %d", p, n))
			}
		}
		parts = append(parts, "priority "+strings.Join(ps, ", "))
	}
	for _, b := range s.Blocked {
		why := b.State
		if b.Attempts > 0 {
			why += fmt.Sprintf(", attempt %d: %s", b.Attempts, cmp.Or(b.LastError, fmt.Sprint("status ", b.LastStatus)))
		}
		parts = append(parts, fmt.Sprintf("%s blocked on %s (%s), %d waiting", b.Key, b.On, why, b.Waiting))
	}
	if s.Delayed > 0 {
		parts = append(parts, fmt.Sprintf("%d delayed", s.Delayed))
	}
	if s.OrderedDead > 0 {
		parts = append(parts, fmt.Sprintf("%d dead letters in ordered keys (last %s: %s)", s.OrderedDead, s.LastDeadKey, s.LastDeadWhy))
	}
	return strings.Join(parts, "; ")
}

// Status is h's lanes' status, from memory: the dispatcher's and the
// spool's counts.
func (h *Host) Status() *LaneStatus {
	if h.inMemory == nil {
		return nil // a plain host: see Rest
	}
	ls := &h.lanes
	if !ls.keyed {
		return nil // one lane: the host's status says all of it
	}
	x := ls.r()
	st := &LaneStatus{Keys: len(ls.units) + 1, OrderingKeys: len(x.order), Delayed: x.delayed.Len(),
		OrderedDead: x.dead, LastDeadKey: x.lastDeadKey, LastDeadWhy: x.lastDeadWhy}
	byKey := map[string]int{}
	for _, u := range h.sh.reader.Lanes(h.name) {
		if st.Priorities == nil {
			st.Priorities = map[string]int{}
		}
		st.Priorities[u.Priority.String()] += u.Queued
		byKey[u.Key] += u.Queued
	}
	for k, n := range byKey {
		st.Busiest = append(st.Busiest, KeyStatus{Key: k, Queued: n})
	}
	slices.SortFunc(st.Busiest, func(a, b KeyStatus) int { return cmp.Or(b.Queued-a.Queued, strings.Compare(a.Key, b.Key)) })
	st.Busiest = st.Busiest[:min(len(st.Busiest), busiestShown)]
	for k, o := range x.order {
		st.Parked += len(o.parked)
		if len(o.parked) > 0 {
			st.Blocked = append(st.Blocked, h.blocked(k, o))
		}
	}
	slices.SortFunc(st.Blocked, func(a, b BlockedKey) int { return cmp.Or(b.Waiting-a.Waiting, strings.Compare(a.Key, b.Key)) })
	st.Blocked = st.Blocked[:min(len(st.Blocked), blockedShown)]
	return st
}

// blocked says what ordering key k waits on: its active webhook, retrying
// (with its last answer), delayed, or next (queued for its turn, or
// being sent).
func (h *Host) blocked(k orderKey, o *orderState) BlockedKey {
	b := BlockedKey{Key: k.ordering, Fairness: k.fairness, Waiting: len(o.parked), On: spool.IDString(o.active), State: "next"}
	for _, it := range h.retry.items {
		if it.M != nil && it.M.ID == o.active {
			at := it.At.UTC()
			b.State, b.Attempts, b.LastStatus, b.LastError, b.NextAt = "retrying", it.M.Attempts, it.M.LastStatus, it.M.LastError, &at
			return b
		}
	}
	for _, r := range h.lanes.r().delayed {
		if r.id == o.active {
			at := r.at.UTC()
			b.State, b.NextAt = "delayed", &at
		}
	}
	return b
}
