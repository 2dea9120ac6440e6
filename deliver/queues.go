package deliver

// What a host sends next, from its window (package window): the window
// picks (a retry that is due, else what its lanes staged, alone or
// gathered into a batch); the dispatcher turns the pick into a request.

import (
	"time"

	"github.com/hookpace/hookpace/window"
)

// next returns what h sends next (window.Host.Next): nothing while a
// batch waits for company, until then (zero: when a read or an attempt
// finishes).
func (h *host) next(now time.Time) (window.Pick, time.Time) { return h.win.Next(now) }

// take removes what next picked from h's window and returns it as the
// request to send: a webhook alone, or a batch.
func (h *host) take(p window.Pick) request {
	ms, batch := h.win.Take(p)
	if batch {
		h.extra += len(ms) - 1
	}
	return request{ms: ms, batch: batch}
}
