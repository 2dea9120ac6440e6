package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/spool"
)

// shutdown stops hookpace within shutdown.timeout: /readyz fails and new
// webhooks get 503 at once; deliveries go on for shutdown.drain (or until
// the queue is empty, or nothing left can be sent in it); the dispatcher stops and its in-flight attempts
// finish; what is still queued goes to shutdown.handoff; the listeners and
// the spool close. With a drain (by default shutdown.timeout less
// config.DrainRoom) or a hand-off, anything left in the spool is an error
// (exit 1) that says how many; with neither, it waits for the next start.
// Either way a log line says how many are left, and where.
func (a *app) shutdown() error {
	cfg := a.current.Load()
	sh := cfg.Shutdown
	begin := time.Now()
	deadline, cancel := context.WithDeadline(context.Background(), begin.Add(sh.Timeout.D()))
	defer cancel()
	a.stopping.Store(true)
	a.proxy.Stopping(stoppingRetryAfter)
	before := a.spool.Usage()
	a.log.Info("shutting down", "deadline", sh.Timeout.D().String(), "drain", sh.Drain.D().String(),
		"handoff", redacted(sh.Handoff), "queued", before.Messages, "dead_letters", before.Dead)
	if sh.Drain > 0 {
		a.drain(begin.Add(sh.Drain.D()), before)
	}
	unsettled := a.stopDeliveries(deadline, sh, begin)
	a.events.Flush() // what the dispatcher reported is in the spool: handed off, or kept
	if sh.Handoff != "" && !within(deadline, handoffGrace, func() { a.handoff(deadline, sh) }) {
		// The hand-off removes each webhook it handed off, a write that
		// waits for space on a disk another process filled.
		a.log.Error("shutdown: the hand-off did not end within shutdown.timeout; exiting without it, what it did not remove stays queued "+
			"(the other hookpace may deliver some of those too)", "timeout", sh.Timeout.D().String())
		if unsettled == nil {
			unsettled = errors.New("shutdown: the hand-off did not end within shutdown.timeout")
		}
	}
	if a.captureLn != nil {
		a.captureLn.Close()
	}
	a.proxySrv.Shutdown(deadline)
	a.inbound.shutdown(deadline)
	a.adminSrv.Shutdown(deadline)
	a.events.Close()
	left := a.spool.Usage()
	a.spoolClosing = true
	if err := closeSpool(a.spool, deadline); err != nil {
		return err
	}
	c := a.proxy.Counts()
	a.log.Info("hookpace stopped", "queued", left.Messages, "dead_letters", left.Dead, "took_ms", time.Since(begin).Milliseconds(),
		"spooled", c["accepted"], "passthrough", c["passthrough"])
	if left.Messages > 0 {
		a.log.Warn("webhooks left in the spool", "left", left.Messages, "spool", cfg.Spool.Dir,
			"note", "a start on this spool directory delivers them; on an emptyDir they are lost with the pod")
	}
	if unsettled != nil {
		return unsettled
	}
	if left.Messages > 0 && (sh.Drain > 0 || sh.Handoff != "") {
		if a.leftInStream() {
			a.log.Info("the webhooks left are in the replicated stream: this replica delivers them when it starts again, "+
				"or another adopts them after spool.replicate.nats.adopt_after", "left", left.Messages)
			return nil
		}
		return fmt.Errorf("%d webhooks still queued in %s after the drain and hand-off: they wait there for a restart on the same spool",
			left.Messages, cfg.Spool.Dir)
	}
	return nil
}

// inFlightGrace is the least time the attempts in flight get to finish
// when the hand-off's room in the timeout has already begun: one abandoned
// after its request went out is delivered twice.
const inFlightGrace = 2 * time.Second

// stopDeliveries stops the dispatcher: it starts no more attempts and
// waits for those in flight until deadline or, with a hand-off, until the
// hand-off's share of the timeout begins (but at least inFlightGrace);
// then it abandons them (they stay queued, and are handed off). Attempts
// that do not settle even then (a delete waiting for disk space that
// another process took) are left behind: it returns the error that makes
// hookpace exit 1, rather than wait past shutdown.timeout.
func (a *app) stopDeliveries(deadline context.Context, sh config.ShutdownConfig, begin time.Time) error {
	stopBy := deadline
	if sh.Handoff != "" {
		by := begin.Add(sh.Timeout.D() - config.HandoffMinRoom)
		by = later(by, time.Now().Add(inFlightGrace))
		var cancel context.CancelFunc
		stopBy, cancel = context.WithDeadline(deadline, by)
		defer cancel()
	}
	err := a.disp.Stop(stopBy)
	var unsettled *deliver.UnsettledError
	switch {
	case errors.As(err, &unsettled):
		a.log.Error("shutdown: deliveries did not settle within shutdown.timeout; exiting without them, they stay queued "+
			"and are delivered again after the next start", "attempts", unsettled.Attempts, "timeout", sh.Timeout.D().String())
		return fmt.Errorf("shutdown: %w", err)
	case err != nil:
		a.log.Warn("shutdown: in-flight deliveries abandoned, they stay queued", "error", err)
	}
	return nil
}

// handoffGrace is how long the hand-off still gets, past the shutdown
// deadline that cancelled it, to notice.
const handoffGrace = time.Second

// within runs fn and reports whether it returned by ctx's end plus grace;
// if not, fn is left running.
func within(ctx context.Context, grace time.Duration, fn func()) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// spoolCloseGrace is the least time the spool gets to close, even when the
// deliveries in flight used up the whole shutdown deadline.
const spoolCloseGrace = 5 * time.Second

// closeSpool closes the spool within what is left of the shutdown deadline
// (at least spoolCloseGrace). Closing flushes Badger's memtables, and
// Badger retries a failed flush forever: with a failing disk, or a spool
// directory removed underneath, Close never returns. Giving up then is
// safe: every acknowledged webhook is already fsync'd, and the next start
// recovers it exactly as after a crash.
func closeSpool(sp *spool.Spool, deadline context.Context) error {
	wait := spoolCloseGrace
	if t, ok := deadline.Deadline(); ok && time.Until(t) > wait {
		wait = time.Until(t)
	}
	closed := make(chan error, 1)
	go func() { closed <- sp.Close() }()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case err := <-closed:
		if err != nil {
			return fmt.Errorf("close spool: %w", err)
		}
		return nil
	case <-timer.C:
		return fmt.Errorf("close spool: not closed after %v (what was left of shutdown.timeout, at least 5s; Badger logged why); "+
			"exiting without a clean close: every acknowledged webhook was fsync'd, and the next start recovers what the spool directory holds", wait.Round(time.Millisecond))
	}
}

// leftInStream reports whether every webhook left in the spool has its
// copy in the replicated stream: none was acknowledged on this node alone
// (on_unavailable: local, or an earlier run's that the start could not
// copy), and no other replica adopted this one's queue while it ran.
// Those outlive the node, so a drain that leaves them is no failure.
func (a *app) leftInStream() bool {
	if a.repl == nil {
		return false
	}
	st := a.repl.Status()
	return st.LocalOnly == 0 && !st.LeaseLost
}
