package spool

import "net/http"

// Lanes: within a host, a webhook waits in the lane of its
// fairness key and priority, so that the dispatcher can serve the keys in
// turn and find each key's next webhook without reading another key's
// backlog. Lane{} (no fairness key, normal priority) is where every
// webhook without them waits, under the keys that earlier versions of
// hookpace wrote, so a spool from before lanes needs no migration.

// Priority orders webhooks within a host and fairness key.
type Priority uint8

const (
	PriorityNormal Priority = iota // zero: a webhook without Hookpace-Priority
	PriorityHigh
	PriorityLow
)

// ParsePriority reads a Hookpace-Priority value: high, normal or low.
func ParsePriority(s string) (Priority, bool) {
	switch s {
	case "high":
		return PriorityHigh, true
	case "normal", "":
		return PriorityNormal, true
	case "low":
		return PriorityLow, true
	}
	return 0, false
}

func (p Priority) String() string {
	switch p {
	case PriorityHigh:
		return "high"
	case PriorityLow:
		return "low"
	}
	return "normal"
}

// Rank orders priorities, first served first: high 0, normal 1, low 2.
func (p Priority) Rank() int {
	switch p {
	case PriorityHigh:
		return 0
	case PriorityLow:
		return 2
	}
	return 1
}

// Lane names a part of a host's queue: a fairness key and a priority.
type Lane struct {
	Key      string
	Priority Priority
}

// Lane is the lane m waits in. A webhook with an ordering key waits at
// normal priority, whatever it asked for: its order is its ids' order
// within the key, and a lane is read in id order.
func (m *Message) Lane() Lane {
	if m.Ordering != "" {
		return Lane{Key: m.Fairness}
	}
	return Lane{Key: m.Fairness, Priority: m.Priority}
}

// LaneUsage is one lane of a host's queue that has webhooks queued.
type LaneUsage struct {
	Lane
	Queued int
}

// ControlHeaders are the request headers that tell hookpace how to queue a
// webhook (its lane, its delay, its coalesce key under the default name):
// hookpace's, never the partner's. Ingest takes them out of what it
// stores; a webhook spooled by a version that kept them still has them,
// so delivery strips them too (StripControlHeaders).
var ControlHeaders = []string{
	"Hookpace-Fairness-Key", "Hookpace-Ordering-Key", "Hookpace-Priority",
	"Hookpace-Delay", "Hookpace-Not-Before", "Hookpace-Coalesce-Key",
}

// StripControlHeaders deletes the ControlHeaders from h, in place.
func StripControlHeaders(h http.Header) {
	for _, k := range ControlHeaders {
		delete(h, k)
	}
}
