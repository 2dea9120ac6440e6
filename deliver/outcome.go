package deliver

import "strconv"

// Outcome is what became of one delivery attempt: the outcome key of the
// delivery log line, and the label telemetry gives hookpace_deliveries_total
// (its String).
type Outcome uint8

// Delivery outcomes.
const (
	OutcomeDelivered Outcome = iota // 2xx: the message is deleted
	OutcomeRetried                  // transient failure: retried after a backoff
	OutcomeHeld                     // 429: the host is held, the message goes first afterwards
	OutcomeDead                     // permanent failure: dead letters
	OutcomeSplit                    // a batch too large for the partner: sent again in halves
	NumOutcomes                     // how many there are, for arrays indexed by them
)

var outcomeNames = [NumOutcomes]string{
	OutcomeDelivered: "delivered",
	OutcomeRetried:   "retried",
	OutcomeHeld:      "held",
	OutcomeDead:      "dead",
	OutcomeSplit:     "split",
}

func (o Outcome) String() string {
	if o >= NumOutcomes {
		return "Outcome(" + strconv.Itoa(int(o)) + ")"
	}
	return outcomeNames[o]
}
