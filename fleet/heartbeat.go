package fleet

import (
	"context"
	"time"
)

// Start announces the replica and keeps announcing it until Close, every
// third of a lease period (every 500 ms at most while degraded, so that
// the replica goes back to shared limits soon after Redis answers).
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
		d = min(d, 500*time.Millisecond)
	}
	return d
}

// Heartbeat announces the replica once and updates the live count; if
// Redis answers, the limiter is shared again. On a Cluster it first asks
// the slots that are down whether they answer again (probeSlots): their
// hosts are shared again if so.
func (l *Limiter) Heartbeat(ctx context.Context) error {
	l.probeSlots(ctx)
	v, err := l.run(ctx, "heartbeat", heartbeatScript, []string{l.replicasKey()},
		l.nowArg(), us(l.opts.LeasePeriod), l.opts.Replica, "0")
	if err != nil {
		return err
	}
	live, _ := v.(int64)
	l.recall.answered(l.now())
	l.mu.Lock()
	was, before := l.degraded, l.live
	l.degraded, l.lastErr, l.live = false, "", max(int(live), 1)
	changed := was || before != l.live
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

func (l *Limiter) replicasKey() string { return "{" + l.opts.KeyPrefix + "}:replicas" }

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
	heartbeatScript.Run(ctx, l.rdb, []string{l.replicasKey()}, l.nowArg(), us(l.opts.LeasePeriod), l.opts.Replica, "1")
	l.rdb.Del(ctx, l.viewKey(l.opts.Replica))
	return l.rdb.Close()
}
