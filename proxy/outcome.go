package proxy

import "strconv"

// Outcome is what became of one request to the proxy: the decision key of
// the ingest log line, and the label telemetry gives
// hookpace_ingest_requests_total (its String). The proxy counts these
// values, never strings, so that a new outcome can't be counted under
// another's name.
type Outcome uint8

// Ingest outcomes.
const (
	OutcomeAccepted Outcome = iota
	OutcomeRejectedBackpressure
	OutcomeTooLarge
	OutcomeRefused
	OutcomePassthrough
	OutcomeBadRequest
	OutcomeUnauthorized
	OutcomeError
	OutcomeRejectedStopping // hookpace is shutting down
	OutcomeDuplicate        // answered with an earlier webhook's id (Idempotency-Key)
	OutcomeCoalesced        // replaced a queued webhook (Hookpace-Coalesce-Key)
	OutcomeRejectedKeyFull  // 429: its fairness key is at max_queued_per_key
	OutcomeStaged           // a hand-off's webhook held until its ordering key's batch ends (handoff_batch.go)
	NumOutcomes             // how many there are, for arrays indexed by them
)

var outcomeNames = [NumOutcomes]string{
	OutcomeAccepted:             "accepted",
	OutcomeRejectedBackpressure: "rejected_backpressure",
	OutcomeTooLarge:             "too_large",
	OutcomeRefused:              "refused",
	OutcomePassthrough:          "passthrough",
	OutcomeBadRequest:           "bad_request",
	OutcomeUnauthorized:         "unauthorized",
	OutcomeError:                "error",
	OutcomeRejectedStopping:     "rejected_stopping",
	OutcomeDuplicate:            "duplicate",
	OutcomeCoalesced:            "coalesced",
	OutcomeRejectedKeyFull:      "rejected_key_full",
	OutcomeStaged:               "handoff_staged",
}

func (o Outcome) String() string {
	if o >= NumOutcomes {
		return "Outcome(" + strconv.Itoa(int(o)) + ")"
	}
	return outcomeNames[o]
}

// What became of a CONNECT: the mode label of hookpace_tunnels_total.
const (
	TunnelIntercepted = "intercepted" // decrypted with the CA: spooled and paced
	TunnelPassthrough = "passthrough" // bytes passed through: NOT spooled, NOT paced
	TunnelRefused     = "refused"     // connect: deny
	// TunnelRejected: the client refused hookpace's certificate (a TLS
	// alert in the intercepting handshake): its webhook failed, loudly.
	TunnelRejected = "rejected"
)
