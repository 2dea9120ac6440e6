package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// shutdown stops hookpace within shutdown.timeout: it stops accepting,
// lets the deliveries in flight finish, and closes the spool, leaving
// everything still queued for the next start.
func (a *app) shutdown() error {
	cfg := a.current.Load()
	a.log.Info("shutting down", "deadline", cfg.Shutdown.Timeout.D().String())
	deadline, cancel := context.WithTimeout(context.Background(), cfg.Shutdown.Timeout.D())
	defer cancel()
	a.stopDeliveries(deadline)
	a.adminSrv.Shutdown(deadline)
	left := a.spool.Usage()
	a.spoolClosing = true
	if err := closeSpool(a.spool, deadline); err != nil {
		return err
	}
	a.log.Info("hookpace stopped", "queued", left.Messages, "dead_letters", left.Dead)
	return nil
}

// stopDeliveries stops the proxy and the dispatcher together: the proxy
// drains its open requests (each gets its answer) while the dispatcher
// stops starting attempts and waits for those in flight, until deadline.
func (a *app) stopDeliveries(deadline context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { a.proxySrv.Shutdown(deadline) })
	if err := a.disp.Stop(deadline); err != nil {
		a.log.Warn("shutdown deadline passed: in-flight deliveries abandoned, they stay queued", "error", err)
	}
	wg.Wait()
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
