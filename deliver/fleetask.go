package deliver

import (
	"context"
	"time"

	"github.com/hookpace/hookpace/fleet"
)

// maxAskBatch is the most asks sent in one round trip. Redis runs a
// round trip's scripts one after the other, so a bigger batch makes the
// hosts at its end wait longer for their answer.
const maxAskBatch = 128

// fleetAsks is the queue of asks waiting for the asker, guarded by the
// dispatcher's mutex.
type fleetAsks struct {
	queued  []queuedAsk
	running bool // the asker goroutine is on its way
	// tokensFor is how long tokens taken ahead may be used
	// (fleet.TokensFor; tests set more or less).
	tokensFor time.Duration
}

type queuedAsk struct {
	h   *host
	req fleet.Request
}

// fleetAsk queues req for h (which is marked as asking) and starts the
// asker unless it runs.
func (d *Dispatcher) fleetAsk(h *host, req fleet.Request) {
	d.asks.queued = append(d.asks.queued, queuedAsk{h: h, req: req})
	if d.asks.running {
		return
	}
	d.asks.running = true
	d.wg.Add(1)
	go d.asker()
}

// asker sends the queued asks, up to maxAskBatch per round trip, until
// none is left, and applies each answer to its host. Asks queued while a
// round trip is under way go with the next one. Called with the lock not
// held.
func (d *Dispatcher) asker() {
	defer d.wg.Done()
	var batch []queuedAsk
	var reqs []fleet.Request
	d.mu.Lock()
	defer d.mu.Unlock()
	for len(d.asks.queued) > 0 {
		n := min(len(d.asks.queued), maxAskBatch)
		batch = append(batch[:0], d.asks.queued[:n]...)
		rest := copy(d.asks.queued, d.asks.queued[n:])
		clear(d.asks.queued[rest:])
		d.asks.queued = d.asks.queued[:rest]
		reqs = reqs[:0]
		for _, a := range batch {
			reqs = append(reqs, a.req)
		}
		d.mu.Unlock()
		grants, err := d.opts.Fleet.AskMany(context.Background(), reqs)
		d.mu.Lock()
		now := time.Now()
		for i, a := range batch {
			// On an error the limiter is degraded (its callback switched
			// every host to its share); unreported leases expire.
			var g *fleet.Grant
			if err == nil {
				g = &grants[i]
			}
			d.applyGrant(a.h, g, a.req, now)
			d.pump(a.h)
		}
		clear(batch)
	}
	d.asks.running = false
}
