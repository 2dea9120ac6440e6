package spool

import (
	"net/http"
	"time"
)

// History keeps what became of the queue's webhooks (the journal). The
// writer tells it of each round at two points, in the order that makes a
// crash lose no history:
type History interface {
	// Leaving is told of the webhooks a round removes from the queue,
	// before the queue write that removes them. It returns records of
	// their outcomes for that write to keep in the queue (outcomes ahead:
	// ahead.go) until the history has made the outcomes durable where it
	// keeps them and drops the records (Spool.DropAhead): what is not in
	// the history is still in the queue, as the webhook or its outcome.
	Leaving(gone []Gone) []Ahead
	// Settled is told of a round whose queue write is durable, before its
	// new webhooks are announced: what it queued and what left, in the
	// round's order. The spool's mutex is held: it must not call the
	// spool.
	Settled(round []Change)
	// Sync returns once everything told so far is durable in the history:
	// the queue is about to be dropped whole, outcomes ahead with it.
	Sync()
	// Close is told once the spool's writer has stopped, before the kept
	// database closes: it makes what it holds durable and stops.
	Close()
}

// What became of a webhook that left the queue (Gone.Outcome).
const (
	OutcomeDelivered = "delivered"
	OutcomeDead      = "dead"
	OutcomePurged    = "purged"
	OutcomeHandedOff = "handed_off"
	OutcomeCoalesced = "coalesced"
)

// States of a webhook still in the queue, or gone from it without an
// outcome (WhereNow). Held (a paused or held host) is the dispatcher's to
// say: the spool says queued.
const (
	StateQueued   = "queued"
	StateInFlight = "in_flight"
	StateUnknown  = "unknown" // left the queue, and its outcome was not recorded
)

// Attempt is one delivery attempt, as the dispatcher reports it. The one
// that delivered a message rides on it (Message.Final) to its outcome
// (History.Leaving).
type Attempt struct {
	At       time.Time
	Duration time.Duration
	Status   int    // 0: no answer
	Error    string // hookpace's reason for anything but a success
	Header   http.Header
	Body     []byte // the first bytes of the answer
	Batch    int    // webhooks sent in the same request (1 alone)
}

// Gone is a webhook a round removes from the queue, and why.
type Gone struct {
	Msg     *Message
	Outcome string // OutcomeDelivered, OutcomeDead, OutcomePurged or OutcomeHandedOff
	Reason  string // why it died, who purged it, where it went
}

// Change is a webhook a round queued, or removed from the queue (Gone).
type Change struct {
	Msg  *Message
	Gone bool
	// Coalesce is its coalesce key as the app gave it ("" for none);
	// Replaces says it replaced the content of a queued webhook with the
	// key, whose id it took.
	Coalesce string
	Replaces bool
}

// leaving is what batch removes from the queue, for History.Leaving.
func leaving(batch []op) []Gone {
	var out []Gone
	for _, o := range batch {
		if o.base().err != nil {
			continue
		}
		switch o := o.(type) {
		case *deleteOp:
			if o.to != "" {
				out = append(out, Gone{Msg: o.msg, Outcome: OutcomeHandedOff, Reason: o.to})
			} else {
				out = append(out, Gone{Msg: o.msg, Outcome: OutcomeDelivered})
			}
		case *buryOp:
			out = append(out, Gone{Msg: o.msg, Outcome: OutcomeDead, Reason: o.reason})
		case *dropOp:
			out = append(out, Gone{Msg: o.msg, Outcome: OutcomePurged, Reason: o.by})
		}
	}
	return out
}

// changes is what batch queued and removed, for History.Settled.
func changes(batch []op) []Change {
	var out []Change
	for _, o := range batch {
		if o.base().err != nil {
			continue
		}
		c := Change{Msg: o.base().msg}
		switch o := o.(type) {
		case *deleteOp, *buryOp, *dropOp:
			c.Gone = true
		case *appendOp:
			if o.coal != nil && o.adds() {
				c.Coalesce, c.Replaces = o.coal.name, o.coal.target != 0
			}
		}
		if c.Gone || o.adds() {
			out = append(out, c)
		}
	}
	return out
}

// noHistory keeps none: Options.History is nil, or gave none (the
// journal off).
type noHistory struct{}

func (noHistory) Leaving([]Gone) []Ahead { return nil }
func (noHistory) Settled([]Change)       {}
func (noHistory) Sync()                  {}
func (noHistory) Close()                 {}
