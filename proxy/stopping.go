package proxy

import (
	"net/http"
	"strconv"
	"time"
)

// Stopping makes every new webhook get 503 with this Retry-After from now
// on (hookpace is shutting down: draining, handing off, closing its spool),
// before anything is read or stored. Passthrough requests still pass until
// the listener closes.
func (p *Proxy) Stopping(retryAfter time.Duration) {
	secs := max(1, int((retryAfter+time.Second-1)/time.Second))
	p.stopping.Store(&decision{outcome: outcomeStopping, status: http.StatusServiceUnavailable,
		reason: "hookpace is shutting down; retry later (elsewhere)",
		header: http.Header{"Retry-After": {strconv.Itoa(secs)}}})
}
