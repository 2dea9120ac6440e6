package server

import (
	"time"

	"github.com/hookpace/hookpace/admin"
	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/pacer"
	"github.com/hookpace/hookpace/spool"
	"github.com/hookpace/hookpace/telemetry"
)

// observeState feeds the gauges behind the shipped alert rules and
// dashboard (deploy/) at scrape time: admission state, readiness by the
// rule /readyz applies (spool.Usage.Ready), and the age of the oldest queued message, which
// costs one read of a record's head per host with a backlog.
func observeState(m *telemetry.Metrics, disp *deliver.Dispatcher, sp *spool.Spool, stopping func() bool) {
	m.ObserveState(func() telemetry.StateSnapshot {
		snap := admin.TakeSnapshot(disp, sp, time.Now(), true)
		u, now := snap.Usage, snap.At
		st := telemetry.StateSnapshot{MaxMessages: u.MaxMessages, MaxBytes: u.MaxBytes,
			HighWater: u.HighWater, LowWater: u.LowWater, Usage: u.Fraction, Accepting: u.Accepting,
			DeadLetters: u.Dead}
		st.DeadByHost = snap.Dead
		if u.Refusal != spool.RefusalClosed {
			st.Refusing = u.Refusal.String() // a telemetry.Refusing* reason, or ""
		}
		st.Ready, _ = u.Ready(stopping())
		st.Hosts = make([]telemetry.HostState, len(snap.Hosts))
		for i, h := range snap.Hosts {
			hs := telemetry.HostState{Host: h.Host, Paused: h.Paused, BreakerOpen: h.Breaker != pacer.BreakerClosed}
			if at, ok := snap.Oldest[h.Host]; ok {
				hs.OldestAge = max(0, now.Sub(at).Seconds())
				st.OldestAge = max(st.OldestAge, hs.OldestAge)
			}
			st.Hosts[i] = hs
		}
		return st
	})
}
