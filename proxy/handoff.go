package proxy

import (
	"net/http"

	"github.com/hookpace/hookpace/handoff"
	"github.com/hookpace/hookpace/spool"
)

// handoffOrigin gives m the id that a hand-off from another hookpace
// claims (the claim is X-Hookpace-Handoff-From), so that the webhook keeps
// the id its app got, which receivers de-duplicate on; but only when the
// claim's signature checks with shutdown.handoff_secret_file. Any client
// the proxy lets in could send the header. Without a secret the claim is
// ignored (the webhook gets an id of this spool's), and that is logged
// once; a claim unsigned or wrongly signed is refused with 403, and its
// ingest line says why. A checked claim keeps its fairness key too
// (handoffKey; mode is the host's fairness.key).
func (p *Proxy) handoffOrigin(r *http.Request, pol *Policy, host, claim, mode string, m *spool.Message) (decision, bool) {
	ref, ok := handoff.Origin(claim)
	if !ok {
		return decision{}, false // no whole id claimed: lineage for the log only
	}
	if pol.HandoffSecret == nil {
		p.unchecked.Do(func() {
			p.log.Warn("hand-off claims ignored: handed-off webhooks get ids of this spool; set shutdown.handoff_secret_file, "+
				"the same on both ends, to keep their ids", "header", handoff.Header, "remote", r.RemoteAddr, "claim", claim)
		})
		return decision{}, false
	}
	if err := handoff.Verify(pol.HandoffSecret, r.Header.Get(handoff.SignatureHeader), claim, r.Method, host, m.Body); err != nil {
		return decision{outcome: outcomeRefused, status: http.StatusForbidden,
			reason: err.Error() + "; not stored (shutdown.handoff_secret_file must be the same on both ends)"}, true
	}
	m.Origin, m.OriginSpool = ref.Seq, ref.Spool
	handoffKey(r, mode, m)
	return decision{}, false
}
