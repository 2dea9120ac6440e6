package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hookpace/hookpace/pacer"
	"github.com/redis/go-redis/v9"
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
	// Unleased is how many attempts the replica started on its share
	// (Redis away) are still out: the ask makes them leases
	// (Grant.Registered), counted toward the cap until they end.
	Unleased int
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
	// Registered are the leases of the attempts Request.Unleased counted.
	Registered []string
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
// if asked alone. An error means Redis did not answer all of them (see
// AskEach): leases granted by the calls that did run expire unrenewed.
func (l *Limiter) AskMany(ctx context.Context, reqs []Request) ([]Grant, error) {
	grants, errs := l.AskEach(ctx, reqs)
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return grants, nil
}

// AskEach is AskMany with an answer or an error per request: on one
// Redis, any error degrades the Limiter and every request shares it; on a
// Cluster, a request whose slot failed (or was already down) has its
// slot's error while the others have their answers.
func (l *Limiter) AskEach(ctx context.Context, reqs []Request) ([]Grant, []error) {
	calls := make([]scriptCall, len(reqs))
	bases := make([]string, len(reqs))
	sent := l.now()
	for i, req := range reqs {
		calls[i], bases[i] = l.askCall(req, l.recall.before(req, sent, l.slotOf(req.Host)))
	}
	vals, errs, err := l.runEach(ctx, "ask", askScript, calls)
	if err != nil && !l.cluster() {
		for i := range errs {
			errs[i] = cmp.Or(errs[i], err)
		}
	}
	grants := make([]Grant, len(reqs))
	now := l.now()
	var lost, untouched []string
	var restores []scriptCall
	for i, v := range vals {
		if errs[i] != nil {
			untouched = append(untouched, reqs[i].Host)
			continue
		}
		var a answer
		if grants[i], a, errs[i] = parseGrant(v, bases[i]); errs[i] != nil {
			continue
		}
		ids := l.recall.after(reqs[i], grants[i], a, sent, now, l.opts.LeasePeriod)
		if !a.lost {
			continue
		}
		lost = append(lost, reqs[i].Host)
		if len(ids) > 0 {
			restores = append(restores, l.restoreCall(reqs[i].Host, bases[i], ids))
		}
	}
	l.recall.touch(untouched, sent)
	if len(lost) > 0 {
		l.logLost(lost)
	}
	if len(restores) > 0 {
		// The stand-ins already count the leases; their real ids are for
		// their renewals and releases. Should this fail, the stand-ins
		// expire with the lease period.
		l.runEach(ctx, "restore", restoreScript, restores)
	}
	return grants, errs
}

// slotOf is host's Cluster slot, -1 when not on a Cluster.
func (l *Limiter) slotOf(host string) int {
	if !l.cluster() {
		return -1
	}
	return int(keySlot(l.key(host, "")))
}

// restoreCall gives the leases ids, counted by an ask (with lease base
// base) under stand-in ids, their real ids.
func (l *Limiter) restoreCall(host, base string, ids []string) scriptCall {
	args := []any{l.nowArg(), us(l.opts.LeasePeriod), base, len(ids)}
	for _, id := range ids {
		args = append(args, id)
	}
	return scriptCall{keys: []string{l.key(host, "leases")}, args: args}
}

// askArg names ask.lua's ARGV slots (1-based): the script reads each into
// the local named in askSlotNames (TestAskSlots), and the releases
// follow, 5 each, from askArgs+1.
const (
	argNow = iota + 1
	argRate
	argCapacity
	argConcurrency
	argWant
	argLeaseTTL
	argLeaseBase
	argAdaptive
	argMinRate
	argBreakerFailures
	argBreakerCooldown
	argHoldSchedule
	argMaxRetryAfter
	argReleases
	argAhead
	argGiveBack
	argBurst
	argVersion
	argDebt
	argDown
	argSinceDown
	argLiveLeases
	argMark
	argUnleased
	askArgs = argUnleased
)

// askCall is the ask script's keys and arguments for req, and the base of
// the lease ids it grants.
func (l *Limiter) askCall(req Request, m memory) (scriptCall, string) {
	lim := pacer.Sanitize(req.Limits)
	base := l.opts.Replica + ":" + strconv.FormatUint(l.leases.Add(1), 36)
	sched := make([]string, len(lim.HoldSchedule))
	for i, d := range lim.HoldSchedule {
		sched[i] = us(d)
	}
	args := make([]any, askArgs, askArgs+5*len(req.Releases))
	set := func(slot int, v any) { args[slot-1] = v }
	set(argNow, l.nowArg())
	set(argRate, ff(lim.Rate))
	set(argCapacity, ff(pacer.Capacity(lim)))
	set(argConcurrency, max(lim.Concurrency, 1))
	set(argWant, req.Want)
	set(argLeaseTTL, us(l.opts.LeasePeriod))
	set(argLeaseBase, base)
	set(argAdaptive, b01(lim.Adaptive))
	set(argMinRate, ff(lim.MinRate))
	set(argBreakerFailures, max(lim.BreakerFailures, 1))
	set(argBreakerCooldown, us(lim.BreakerCooldown))
	set(argHoldSchedule, strings.Join(sched, ","))
	set(argMaxRetryAfter, us(lim.MaxRetryAfter))
	set(argReleases, len(req.Releases))
	set(argAhead, max(req.Ahead, 0))
	set(argGiveBack, max(req.GiveBack, 0))
	set(argBurst, lim.Burst)
	set(argVersion, i64(m.v))
	set(argDebt, i64(m.floor))
	set(argDown, i64(m.down))
	set(argSinceDown, i64(m.since))
	set(argLiveLeases, i64(m.leases))
	set(argMark, l.mark)
	set(argUnleased, max(req.Unleased, 0))
	for _, r := range req.Releases {
		ra := "-1"
		if r.HasRetry {
			ra = us(r.RetryAfter)
		}
		args = append(args, r.Lease, int(r.Outcome), ra, us(r.Age), b01(r.Keep))
	}
	keys := []string{l.key(req.Host, "tat"), l.key(req.Host, "leases"), l.key(req.Host, "state"), l.key(req.Host, "paused"),
		l.key(req.Host, "waiters")}
	return scriptCall{keys: keys, args: args}, base
}

// answer is what an ask's reply says besides the Grant, for recall.
type answer struct {
	v, ahead    int64 // the version of this replica's last write, the bucket's debt µs
	lost, wrote bool
}

func parseGrant(v any, base string) (Grant, answer, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 15 {
		return Grant{}, answer{}, fmt.Errorf("fleet ask: unexpected reply %v", v)
	}
	n := func(i int) int64 { x, _ := a[i].(int64); return x }
	s := func(i int) string { x, _ := a[i].(string); return x }
	g := Grant{Reason: s(2), InFlight: int(n(3)), HeldFor: time.Duration(n(5)) * time.Microsecond,
		C429: int(n(6)), Breaker: s(7), Paused: n(8) == 1, Tokens: int(n(9))}
	g.Rate, _ = strconv.ParseFloat(s(4), 64)
	for i := range int(n(0)) {
		g.Leases = append(g.Leases, base+":"+strconv.Itoa(i+1))
	}
	for i := range int(n(14)) {
		g.Registered = append(g.Registered, base+":u"+strconv.Itoa(i+1))
	}
	if w := n(1); w < 0 {
		g.Poll = true
	} else {
		g.Wait = time.Duration(w) * time.Microsecond
	}
	return g, answer{v: n(10), ahead: n(11), lost: n(12) == 1, wrote: n(13) == 1}, nil
}

// Renew extends the leases of attempts still running (and makes them
// again if Redis lost the host's state).
func (l *Limiter) Renew(ctx context.Context, host string, leases []string) error {
	now := l.now()
	args := []any{l.nowArg(), us(l.opts.LeasePeriod), i64(l.recall.version(host, now)), l.mark}
	for _, id := range leases {
		args = append(args, id)
	}
	_, err := l.run(ctx, "renew", renewScript, []string{l.key(host, "leases"), l.key(host, "state")}, args...)
	if err == nil {
		l.recall.renewed(host, leases, now, l.opts.LeasePeriod)
	}
	return err
}

// Pause pauses host for the whole fleet.
func (l *Limiter) Pause(ctx context.Context, host string) error {
	return l.cmd(ctx, "pause", l.key(host, "paused"), func(ctx context.Context) error {
		_, err := l.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, l.key(host, "paused"), l.opts.Replica, pauseTTL)
			p.Del(ctx, l.key(host, "resumed"))
			return nil
		})
		if err != nil {
			return err
		}
		return l.newPauseWord(ctx)
	})
}

// newPauseWord sets the fleet's pause word anew after a pause or resume
// (PauseWord). It is its own command, after the host's: on a Cluster the
// word lives in another slot.
func (l *Limiter) newPauseWord(ctx context.Context) error {
	word := l.opts.Replica + ":" + strconv.FormatInt(time.Now().UnixNano(), 36)
	return l.rdb.Set(ctx, l.pausesKey(), word, pauseTTL).Err()
}

// PauseWord is the fleet's pause word: it changes with every pause or
// resume anywhere in the fleet, and is "" when Redis has none (it never
// had one, or lost it). A replica with paused hosts asks for their states
// (PauseStates) only when the word changed since it last did: one GET a
// second while nothing changes, not two commands per paused host.
func (l *Limiter) PauseWord(ctx context.Context) (string, error) {
	var word string
	err := l.cmd(ctx, "pause_word", l.pausesKey(), func(ctx context.Context) error {
		v, err := l.rdb.Get(ctx, l.pausesKey()).Result()
		if errors.Is(err, redis.Nil) {
			return nil
		}
		word = v
		return err
	})
	return word, err
}

func (l *Limiter) pausesKey() string { return "{" + l.opts.KeyPrefix + "}:pauses" }

// Resume undoes Pause for the whole fleet, and leaves word of it (kept as
// long as a pause), so that a replica that recorded the pause clears its
// record too (PauseStates), while a pause that Redis lost (a restart
// without persistence) is not taken for a resume.
func (l *Limiter) Resume(ctx context.Context, host string) error {
	return l.cmd(ctx, "resume", l.key(host, "paused"), func(ctx context.Context) error {
		_, err := l.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, l.key(host, "paused"))
			p.Set(ctx, l.key(host, "resumed"), l.opts.Replica, pauseTTL)
			return nil
		})
		if err != nil {
			return err
		}
		return l.newPauseWord(ctx)
	})
}

// PauseState is what the fleet says of a host's pause.
type PauseState int

const (
	PauseUnknown  PauseState = iota // neither paused nor resumed: never said, expired, or lost by Redis
	Paused                          // paused by a replica
	Resumed                         // resumed by a replica since its last pause
	PauseNoAnswer                   // its Cluster slot did not answer: ask again later
)

// PauseStates reports, in one round trip, what the fleet says of the
// pause of each of hosts. On a Cluster, a host whose slot did not answer
// is PauseNoAnswer (its slot is marked down) and the others' states
// stand; the error is nil unless none answered.
func (l *Limiter) PauseStates(ctx context.Context, hosts []string) ([]PauseState, error) {
	out := make([]PauseState, len(hosts))
	var failed []string
	err := l.cmd(ctx, "pause_state", "", func(ctx context.Context) error {
		cmds := make([]*redis.IntCmd, 2*len(hosts))
		_, err := l.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, h := range hosts {
				cmds[2*i] = p.Exists(ctx, l.key(h, "paused"))
				cmds[2*i+1] = p.Exists(ctx, l.key(h, "resumed"))
			}
			return nil
		})
		if err != nil && !l.cluster() {
			return err
		}
		for i, h := range hosts {
			switch {
			case cmds[2*i].Err() != nil || cmds[2*i+1].Err() != nil:
				out[i] = PauseNoAnswer
				failed = append(failed, l.key(h, "paused"))
			case cmds[2*i].Val() > 0:
				out[i] = Paused
			case cmds[2*i+1].Val() > 0:
				out[i] = Resumed
			}
		}
		if len(failed) == len(hosts) {
			return err
		}
		return nil
	})
	if len(failed) > 0 {
		l.failKeys(fmt.Errorf("fleet pause_state: %d hosts' slots did not answer", len(failed)), failed)
	}
	return out, err
}

// cmd runs fn with the operation timeout, recording the round trip and
// falling back on an error: the whole Limiter on one Redis, key's slot on
// a Cluster (none when key is "": a read across slots).
func (l *Limiter) cmd(ctx context.Context, op, key string, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	start := time.Now()
	err := fn(ctx)
	l.obs.FleetRoundTrip(op, time.Since(start), err)
	if err != nil {
		err = fmt.Errorf("fleet %s: %w", op, err)
		var keys []string
		if key != "" {
			keys = []string{key}
		}
		l.failKeys(err, keys)
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
