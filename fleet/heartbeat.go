package fleet

import (
	"context"
	"fmt"
	"time"
)

// Start announces the replica and keeps announcing it until Close, every
// third of a lease period (every 500 ms at most while degraded, so that
// the replica hears soon that Redis answers, and every returningBeat
// while it waits for the fleet to rejoin).
func (l *Limiter) Start() {
	if !l.started.CompareAndSwap(false, true) {
		return
	}
	l.beat()
	go func() {
		defer close(l.done)
		t := time.NewTimer(l.interval())
		defer t.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-t.C:
			}
			l.beat()
			t.Reset(l.interval())
		}
	}()
}

// beat is one heartbeat, then this replica's summary for the fleet's
// view (view.go) and its spool's identity (spools.go) if Redis answered.
func (l *Limiter) beat() {
	ctx := context.Background()
	if l.Heartbeat(ctx) == nil {
		l.publishView(ctx)
		l.publishIdentity(ctx)
	}
}

func (l *Limiter) interval() time.Duration {
	d := l.opts.LeasePeriod / 3
	deg, _, _ := l.State()
	if n, _ := l.SlotsDown(); deg || n > 0 {
		d = min(d, degradedBeat)
	}
	if l.Returning() {
		d = min(d, returningBeat)
	}
	return d
}

// degradedBeat is the heartbeat's interval while degraded, returningBeat
// while Redis answers and the replica waits for the fleet to rejoin.
const (
	degradedBeat  = 500 * time.Millisecond
	returningBeat = 100 * time.Millisecond
)

// rejoinWait is the longest the replicas that paced alone wait, after
// the first of them heard Redis again, for every replica to be back
// (heartbeat.lua): a lease period, after which a replica not heard from is
// not live. Were each to go back to the shared limits as soon as it heard,
// those going first would take the whole limits from a Redis that knows
// nothing of the sends of those still on their shares.
func (l *Limiter) rejoinWait() time.Duration { return l.opts.LeasePeriod }

// Heartbeat announces the replica once and updates the live count; if
// Redis answers, the limiter is shared again: at once if it was, or if it
// paced alone, when the fleet rejoins (heartbeat.lua: every replica is
// back, with its attempts on its share counted in Redis), returning
// meanwhile (Returning: it starts nothing on its shares, and its live
// count stays what it was, Redis restarted empty counting only the
// replicas back so far). On a Cluster it first asks the slots that are
// down whether they answer again (probeSlots): their hosts are shared
// again if so.
func (l *Limiter) Heartbeat(ctx context.Context) error {
	l.probeSlots(ctx)
	deg, known, _ := l.State()
	state := "0"
	if deg {
		state = "2"
		if l.uncountedNow() > 0 {
			state = "1"
		}
	}
	v, err := l.run(ctx, "heartbeat", heartbeatScript, []string{l.replicasKey(), l.rejoinKey()},
		l.nowArg(), us(l.opts.LeasePeriod), l.opts.Replica, "0", state, known, us(l.rejoinWait()))
	if err != nil {
		return err
	}
	live, rejoin, index := heartbeatReply(v)
	l.mu.Lock()
	was, before := l.degraded, l.live
	if was && (rejoin > 0 || state != "2") {
		// Not back yet (it went degraded after this beat started, or has
		// attempts out uncounted), or the others are not.
		at := time.Now().Add(rejoin)
		first := l.rejoinAt.IsZero()
		l.rejoinAt, l.live = at, max(before, live)
		fns := l.onChange
		l.mu.Unlock()
		if first {
			l.log.Info("fleet: redis answers again; counting the attempts out on the local share, and starting none, until every replica is back",
				"rejoin_within", rejoin.String(), "share", fmt.Sprintf("1/%d", max(before, live)))
			for _, fn := range fns {
				fn()
			}
		}
		return nil
	}
	l.mu.Unlock()
	l.recall.answered(l.now())
	l.mu.Lock()
	l.degraded, l.lastErr, l.live, l.rejoinAt = false, "", live, time.Time{}
	changed := was || before != l.live || l.index != index
	l.index = index
	fns := l.onChange
	l.mu.Unlock()
	if was {
		l.log.Info("fleet shared again: redis answers", "replicas", l.live)
	}
	if changed {
		for _, fn := range fns {
			fn()
		}
	}
	return nil
}

// heartbeatReply reads heartbeat.lua's answer: the live replicas (at
// least 1), the time until the rejoin and the replica's index among the
// live ones (0 to live-1).
func heartbeatReply(v any) (live int, rejoin time.Duration, index int) {
	live = 1
	r, _ := v.([]any)
	if len(r) > 0 {
		if n, ok := r[0].(int64); ok && n > 1 {
			live = int(n)
		}
	}
	if len(r) > 1 {
		if us, ok := r[1].(int64); ok && us > 0 {
			rejoin = time.Duration(us) * time.Microsecond
		}
	}
	if len(r) > 2 {
		if i, ok := r[2].(int64); ok && i > 0 && int(i) < live {
			index = int(i)
		}
	}
	return live, rejoin, index
}

func (l *Limiter) replicasKey() string { return "{" + l.opts.KeyPrefix + "}:replicas" }

func (l *Limiter) rejoinKey() string { return "{" + l.opts.KeyPrefix + "}:rejoin" }

// Close stops the heartbeat, leaves the fleet (the others' share grows at
// once rather than when this replica's entry expires) and closes the
// connection.
func (l *Limiter) Close() error {
	select {
	case <-l.stop:
		return nil
	default:
	}
	close(l.stop)
	if l.started.Load() {
		<-l.done
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.opts.Timeout)
	defer cancel()
	heartbeatScript.Run(ctx, l.rdb, []string{l.replicasKey(), l.rejoinKey()}, l.nowArg(), us(l.opts.LeasePeriod), l.opts.Replica, "1", "0", 0, 0)
	l.rdb.Del(ctx, l.viewKey(l.opts.Replica))
	return l.rdb.Close()
}
