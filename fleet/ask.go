package fleet

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hookpace/hookpace/pacer"
)

// Release reports a finished attempt (or an unused lease) to the fleet.
type Release struct {
	Lease      string
	Outcome    pacer.Outcome
	RetryAfter time.Duration // from a Retry-After header, if HasRetry
	HasRetry   bool
	// A release with Outcome NoSend and HasRetry (its Lease may be empty)
	// says the partner's quota is used up for RetryAfter: the host is held
	// that long, with reason "quota".
	Age time.Duration // since the attempt was sent
	// Keep reports the attempt but keeps its lease, renewed, for the
	// replica's next send (which needs a token taken ahead).
	Keep bool
}

// Request is one send decision for one host.
type Request struct {
	Host     string
	Limits   pacer.Limits
	Want     int       // tokens and leases to take, 0 to only release
	Releases []Release // finished attempts to apply first
	// Ahead is how many tokens to take without leases, for sends on leases
	// the replica keeps (Release.Keep). Tokens taken ahead and held unused
	// widen the fleet's bound by as many sends, so a replica holds at most
	// Reserve(limits, live) of them. GiveBack returns tokens taken ahead
	// and not used.
	Ahead    int
	GiveBack int
}

// Grant is the fleet's answer.
type Grant struct {
	Leases []string // one per send allowed now
	// Wait is when to ask again for more, if fewer than Want were granted;
	// Poll means no time is known (paused, all slots taken by other
	// replicas, a breaker probe running elsewhere): ask again after a
	// while.
	Wait   time.Duration
	Poll   bool
	Reason string // why nothing was granted: paused, 429, breaker open, concurrency, rate...

	InFlight int     // fleet-wide leases held for the host
	Rate     float64 // the shared (adaptive) rate
	HeldFor  time.Duration
	C429     int
	Breaker  string
	Paused   bool
	Tokens   int // taken ahead (Request.Ahead)
}

// Reserve is how many tokens taken ahead one of live replicas may hold
// unused at a time: half of the part of the burst that the bucket holds
// back for delays between a token and its send (pacer.Capacity), divided
// among the replicas. A send in a window of W used either a token taken
// in it (at most the bucket's capacity plus R·W) or one held at its start,
// so the fleet stays within B + R·W. Zero for slow hosts, where nothing
// is held back.
func Reserve(lim pacer.Limits, live int) int {
	lim = pacer.Sanitize(lim)
	margin := float64(lim.Burst) - pacer.Capacity(lim)
	return int(margin / float64(2*max(live, 1)))
}

// Ask applies req.Releases and takes up to req.Want tokens and leases, in
// one round trip. An error means Redis did not answer: the Limiter is
// degraded and the caller paces with its local share.
func (l *Limiter) Ask(ctx context.Context, req Request) (Grant, error) {
	g, err := l.AskMany(ctx, []Request{req})
	if err != nil {
		return Grant{}, err
	}
	return g[0], nil
}

// AskMany makes the send decisions of several requests (of different
// hosts, or of one host in order) in one round trip: a pipeline with one
// call of the ask script per request. Each call is atomic on its own, as
// if asked alone. An error means Redis did not answer all of them: the
// Limiter is degraded, and leases granted by the calls that did run expire
// unrenewed.
func (l *Limiter) AskMany(ctx context.Context, reqs []Request) ([]Grant, error) {
	calls := make([]scriptCall, len(reqs))
	bases := make([]string, len(reqs))
	for i, req := range reqs {
		calls[i], bases[i] = l.askCall(req)
	}
	vals, err := l.runMany(ctx, "ask", askScript, calls)
	if err != nil {
		return nil, err
	}
	grants := make([]Grant, len(reqs))
	for i, v := range vals {
		if grants[i], err = parseGrant(v, bases[i]); err != nil {
			return nil, err
		}
	}
	return grants, nil
}

// askCall is the ask script's keys and arguments for req, and the base of
// the lease ids it grants.
func (l *Limiter) askCall(req Request) (scriptCall, string) {
	lim := pacer.Sanitize(req.Limits)
	base := l.opts.Replica + ":" + strconv.FormatUint(l.leases.Add(1), 36)
	sched := make([]string, len(lim.HoldSchedule))
	for i, d := range lim.HoldSchedule {
		sched[i] = us(d)
	}
	args := make([]any, 0, 17+5*len(req.Releases))
	args = append(args, l.nowArg(), ff(lim.Rate), ff(pacer.Capacity(lim)), max(lim.Concurrency, 1), req.Want,
		us(l.opts.LeasePeriod), base, b01(lim.Adaptive), ff(lim.MinRate), max(lim.BreakerFailures, 1),
		us(lim.BreakerCooldown), strings.Join(sched, ","), us(lim.MaxRetryAfter), len(req.Releases),
		max(req.Ahead, 0), max(req.GiveBack, 0), lim.Burst)
	for _, r := range req.Releases {
		ra := "-1"
		if r.HasRetry {
			ra = us(r.RetryAfter)
		}
		args = append(args, r.Lease, int(r.Outcome), ra, us(r.Age), b01(r.Keep))
	}
	keys := []string{l.key(req.Host, "tat"), l.key(req.Host, "leases"), l.key(req.Host, "state"), l.key(req.Host, "paused")}
	return scriptCall{keys: keys, args: args}, base
}

func parseGrant(v any, base string) (Grant, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 10 {
		return Grant{}, fmt.Errorf("fleet ask: unexpected reply %v", v)
	}
	n := func(i int) int64 { x, _ := a[i].(int64); return x }
	s := func(i int) string { x, _ := a[i].(string); return x }
	g := Grant{Reason: s(2), InFlight: int(n(3)), HeldFor: time.Duration(n(5)) * time.Microsecond,
		C429: int(n(6)), Breaker: s(7), Paused: n(8) == 1, Tokens: int(n(9))}
	g.Rate, _ = strconv.ParseFloat(s(4), 64)
	for i := range int(n(0)) {
		g.Leases = append(g.Leases, base+":"+strconv.Itoa(i+1))
	}
	if w := n(1); w < 0 {
		g.Poll = true
	} else {
		g.Wait = time.Duration(w) * time.Microsecond
	}
	return g, nil
}

// Renew extends the leases of attempts still running.
func (l *Limiter) Renew(ctx context.Context, host string, leases []string) error {
	args := []any{l.nowArg(), us(l.opts.LeasePeriod)}
	for _, id := range leases {
		args = append(args, id)
	}
	_, err := l.run(ctx, "renew", renewScript, []string{l.key(host, "leases")}, args...)
	return err
}

// Pause pauses host for the whole fleet.
func (l *Limiter) Pause(ctx context.Context, host string) error {
	return l.cmd(ctx, "pause", func(ctx context.Context) error {
		return l.rdb.Set(ctx, l.key(host, "paused"), l.opts.Replica, pauseTTL).Err()
	})
}

// Resume undoes Pause for the whole fleet.
func (l *Limiter) Resume(ctx context.Context, host string) error {
	return l.cmd(ctx, "resume", func(ctx context.Context) error {
		return l.rdb.Del(ctx, l.key(host, "paused")).Err()
	})
}

func (l *Limiter) cmd(ctx context.Context, op string, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	start := time.Now()
	err := fn(ctx)
	l.obs.FleetRoundTrip(op, time.Since(start), err)
	if err != nil {
		err = fmt.Errorf("fleet %s: %w", op, err)
		l.fail(err)
	}
	return err
}

func ff(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func b01(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
