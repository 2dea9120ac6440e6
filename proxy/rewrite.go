package proxy

import (
	"context"
	"errors"

	"github.com/hookpace/hookpace/rewrite"
	"github.com/hookpace/hookpace/spool"
)

// rewriteBody applies a host's JSON rules to m's body once, before it is
// stored: coalescing, dedupe and the spool see the rewritten body, and a
// dropped or masked value is never written. The rules that matched go
// with m's headers (rewrite.AppliedHeader) for the journal; delivery
// removes that header. A body that the rules need as JSON and is not
// gets 400.
func (p *Proxy) rewriteBody(ctx context.Context, host string, rules *rewrite.JSON, m *spool.Message) (decision, bool) {
	delete(m.Header, rewrite.AppliedHeader) // only hookpace writes it
	if rules == nil {
		return decision{}, false
	}
	out, applied, err := rules.Apply(m.Body)
	if err != nil {
		reason := "rewrite: " + err.Error()
		if errors.Is(err, rewrite.ErrNotJSON) {
			reason = "body is not JSON, and the rewrite.json rules of " + host + " need JSON"
		}
		return badRequest(reason), true
	}
	if !applied.Changed() {
		return decision{}, false
	}
	// What came in is gone from memory too, not only from the disk.
	clear(m.Body)
	m.Body = out
	m.Header[rewrite.AppliedHeader] = []string{applied.String()}
	p.opts.Metrics.Rewritten(ctx, host, applied.Dropped, applied.Masked)
	return decision{}, false
}
