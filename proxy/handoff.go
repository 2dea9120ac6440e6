package proxy

import (
	"net/http"
	"time"

	"github.com/hookpace/hookpace/handoff"
	"github.com/hookpace/hookpace/spool"
)

// handoff applies what a hand-off from another hookpace carries besides
// the webhook: the claim to its id (handoffOrigin) and its host's pause
// or hold (handoffHost). The host state's headers are never stored: the
// partner gets what the app sent, and a client's forged state is dropped.
func (p *Proxy) handoff(r *http.Request, pol *Policy, host string, mode FairnessFrom, m *spool.Message) (decision, bool) {
	m.Header.Del(handoff.HostHeader)
	m.Header.Del(handoff.HostSignatureHeader)
	from := r.Header[handoff.Header]
	if len(from) == 0 {
		return decision{}, false
	}
	return p.handoffOrigin(r, pol, host, from[0], mode, m)
}

// handoffOrigin gives m the id that a hand-off from another hookpace
// claims (the claim is X-Hookpace-Handoff-From), so that the webhook keeps
// the id its app got, which receivers de-duplicate on; but only when the
// claim's signature checks with shutdown.handoff_secret_file. Any client
// the proxy lets in could send the header. Without a secret the claim is
// ignored (the webhook gets an id of this spool's), and so is the host
// state it carries, and that is logged once; a claim unsigned or wrongly
// signed is refused with 403, and its ingest line says why. A checked
// claim keeps its fairness key too (handoffKey; mode is the host's
// fairness.key), and applies its host state (handoffHost).
func (p *Proxy) handoffOrigin(r *http.Request, pol *Policy, host, claim string, mode FairnessFrom, m *spool.Message) (decision, bool) {
	ref, ok := handoff.Origin(claim)
	if !ok {
		return decision{}, false // no whole id claimed: lineage for the log only
	}
	if pol.HandoffSecret == nil {
		p.unchecked.Do(func() {
			p.log.Warn("hand-off claims ignored: handed-off webhooks get ids of this spool, and the pauses and holds "+
				"a hand-off carries are not applied; set shutdown.handoff_secret_file, the same on both ends, to keep "+
				"their ids and apply them", "header", handoff.Header, "remote", r.RemoteAddr, "claim", claim)
		})
		return decision{}, false
	}
	if err := handoff.Verify(pol.HandoffSecret, r.Header.Get(handoff.SignatureHeader), claim, r.Method, host, m.Body); err != nil {
		return decision{outcome: outcomeRefused, status: http.StatusForbidden,
			reason: err.Error() + "; not stored (shutdown.handoff_secret_file must be the same on both ends)"}, true
	}
	if d, refused := p.handoffHost(r, pol, host, claim); refused {
		return d, true
	}
	m.Origin, m.OriginSpool = ref.Seq, ref.Spool
	handoffKey(r, mode, m)
	return decision{}, false
}

// HostStates applies the pauses and holds that hand-offs carry; the
// dispatcher (*deliver.Dispatcher) is the real one.
type HostStates interface {
	// PauseBy pauses host durably, why saying who paused it.
	PauseBy(host, why string) error
	// HoldUntil holds host until until, unless it is held that long.
	HoldUntil(host string, until time.Time, why string) bool
}

// handoffHost applies the pause or hold that a checked hand-off carries
// for its host (handoff.HostHeader), before the webhook is stored: none
// of the host's handed-off webhooks can be delivered before it. Its own
// signature must check too (else 403). A pause that cannot be recorded
// keeps the webhook with the other hookpace (503).
func (p *Proxy) handoffHost(r *http.Request, pol *Policy, host, claim string) (decision, bool) {
	v := r.Header.Get(handoff.HostHeader)
	if v == "" {
		return decision{}, false
	}
	if err := handoff.VerifyHost(pol.HandoffSecret, r.Header.Get(handoff.HostSignatureHeader), claim, host, v); err != nil {
		return decision{outcome: outcomeRefused, status: http.StatusForbidden, reason: err.Error() + "; not stored"}, true
	}
	st, err := handoff.ParseHostState(v)
	if err != nil {
		return badRequest(err.Error()), true
	}
	hs := p.opts.HostStates
	if hs == nil {
		return decision{outcome: outcomeError, status: http.StatusServiceUnavailable,
			reason: "not stored: this hookpace cannot apply the pause or hold the hand-off carries"}, true
	}
	why := "hand-off from " + handoff.From(claim)
	if st.PausedBy != "" {
		if err := hs.PauseBy(host, why+": "+st.PausedBy); err != nil {
			return decision{outcome: outcomeError, status: http.StatusServiceUnavailable,
				reason: "not stored: the pause the hand-off carries was not recorded: " + err.Error()}, true
		}
	}
	held := !st.HeldUntil.IsZero() && hs.HoldUntil(host, st.HeldUntil, why+": "+st.HoldReason)
	p.log.Info("hand-off host state applied", "host", host, "from", handoff.From(claim), "paused", st.PausedBy != "",
		"held", held, "state", v)
	return decision{}, false
}
