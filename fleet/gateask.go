package fleet

import (
	"context"
	"sync"
	"time"
)

// maxAskBatch is the most asks sent in one round trip. Redis runs a
// round trip's scripts one after the other, so a bigger batch makes the
// hosts at its end wait longer for their answer.
const maxAskBatch = 128

// asks is the queue of asks waiting for the asker, guarded by the gates'
// mutex.
type asks struct {
	queued  []queuedAsk
	running bool // the asker goroutine is on its way
}

type queuedAsk struct {
	g   *gate
	req Request
}

// ask queues an ask for g's next sends (carrying its finished attempts)
// for the asker, unless g has one under way. Called with the gates' mutex
// held.
func (g *gate) ask(now time.Time) {
	gs := g.gs
	if g.fl.Asking() || gs.stopping {
		return
	}
	n := Need{Host: g.name, Limits: g.lim, Live: gs.live, Shared: g.shared(), InFlight: g.pace.InFlight(),
		Slots: g.pace.Limit(), Count: g.answers()}
	if n.Shared {
		n.Due, n.Paused = g.backlog.Due(now), g.pace.Paused()
	}
	req, ok := g.fl.Ask(now, n)
	if !ok {
		return
	}
	gs.asks.queued = append(gs.asks.queued, queuedAsk{g: g, req: req})
	if gs.asks.running {
		return
	}
	gs.asks.running = true
	gs.wg.Add(1)
	go gs.asker()
}

// asker sends the queued asks, up to maxAskBatch per round trip, until
// none is left, applies each answer to its host and wakes the hosts. Asks
// queued while a round trip is under way go with the next one.
func (gs *Gates) asker() {
	defer gs.wg.Done()
	var batch []queuedAsk
	var reqs []Request
	var paused []string
	gs.mu.Lock()
	for len(gs.asks.queued) > 0 {
		n := min(len(gs.asks.queued), maxAskBatch)
		batch = append(batch[:0], gs.asks.queued[:n]...)
		rest := copy(gs.asks.queued, gs.asks.queued[n:])
		clear(gs.asks.queued[rest:])
		gs.asks.queued = gs.asks.queued[:rest]
		reqs = reqs[:0]
		for _, a := range batch {
			reqs = append(reqs, a.req)
		}
		gs.mu.Unlock()
		grants, errs := gs.lim.AskEach(context.Background(), reqs)
		paused = paused[:0]
		gs.wake(func() []string {
			gs.mu.Lock()
			defer gs.mu.Unlock()
			now := time.Now()
			woken := make([]string, len(batch))
			for i, a := range batch {
				// On an error the limiter is degraded, or on a Cluster
				// the host's slot is down (its callback switched the
				// hosts concerned to their share); unreported leases
				// expire.
				var g *Grant
				if errs[i] == nil {
					g = &grants[i]
				}
				if a.g.answered(g, a.req, now) {
					paused = append(paused, a.g.name)
				}
				woken[i] = a.g.name
			}
			return woken
		})
		clear(batch)
		for _, name := range paused {
			gs.paused(name, true)
		}
		gs.mu.Lock()
	}
	gs.asks.running = false
	gs.mu.Unlock()
}

// answered applies the answer g to the ask req (nil: Redis did not
// answer). It reports whether the answer says another replica paused the
// host: its pacer is paused at once, and the dispatcher is to record it.
func (g *gate) answered(gr *Grant, req Request, now time.Time) (pausedElsewhere bool) {
	counted := g.fl.Answered(now, req, gr, g.degraded, g.gs.tokensFor)
	for _, id := range counted {
		g.keepAlive(id)
	}
	if len(counted) > 0 {
		g.pace.SetLimits(g.limits(), now)
	}
	if g.counts() {
		g.ask(now) // attempts started on the share while this ask was under way
	}
	// A resume is learned by syncPauses, which tells it from a pause
	// Redis lost.
	if gr != nil && !g.degraded && gr.Paused && !g.pace.Paused() {
		g.pace.Pause()
		g.gs.armPauseSync()
		return true
	}
	return false
}

// renewal keeps one lease alive while its attempt runs. Most attempts end
// long before a third of the lease period, so nothing runs for them but a
// timer: no goroutine or ticker per attempt.
type renewal struct {
	mu      sync.Mutex
	t       *time.Timer
	stopped bool
}

// keepAlive renews lease every third of the lease period until letExpire.
// Called with the gates' mutex held.
func (g *gate) keepAlive(lease string) {
	every := g.gs.lim.LeasePeriod() / 3
	r := &renewal{}
	lim, host := g.gs.lim, g.name
	r.mu.Lock()
	defer r.mu.Unlock()
	r.t = time.AfterFunc(every, func() {
		lim.Renew(context.Background(), host, []string{lease})
		r.mu.Lock()
		defer r.mu.Unlock()
		if !r.stopped {
			r.t.Reset(every)
		}
	})
	if g.renew == nil {
		g.renew = map[string]*renewal{}
	}
	g.renew[lease] = r
}

// letExpire stops renewing lease: its attempt ended. Called with the
// gates' mutex held.
func (g *gate) letExpire(lease string) {
	r := g.renew[lease]
	if r == nil {
		return
	}
	delete(g.renew, lease)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	r.t.Stop()
}

// flush gives back what every host still holds (see Host.Flush).
func (gs *Gates) flush() {
	gs.mu.Lock()
	var reqs []Request
	for _, g := range gs.hosts {
		rel, back := g.fl.Flush()
		if len(rel) > 0 || back > 0 {
			reqs = append(reqs, Request{Host: g.name, Limits: g.lim, Releases: rel, GiveBack: back})
		}
	}
	gs.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for len(reqs) > 0 && ctx.Err() == nil {
		n := min(len(reqs), maxAskBatch)
		// On a Cluster, the hosts on live masters give theirs back even
		// when one master does not answer.
		if _, errs := gs.lim.AskEach(ctx, reqs[:n]); !gs.lim.cluster() && errs[0] != nil {
			return
		}
		reqs = reqs[n:]
	}
}
