package server

import (
	"time"

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
		u := sp.Usage()
		now := time.Now()
		st := telemetry.StateSnapshot{MaxMessages: u.MaxMessages, MaxBytes: u.MaxBytes,
			HighWater: u.HighWater, LowWater: u.LowWater, Usage: u.Fraction, Accepting: u.Accepting,
			DeadLetters: u.Dead}
		st.DeadByHost, _ = sp.DeadByHost() // kept in memory: cheap
		if u.Refusal != spool.RefusalClosed {
			st.Refusing = u.Refusal.String() // a telemetry.Refusing* reason, or ""
		}
		st.Ready, _ = u.Ready(stopping())
		hosts := disp.Hosts()
		st.Hosts = make([]telemetry.HostState, len(hosts))
		for i, h := range hosts {
			hs := telemetry.HostState{Host: h.Host, Paused: h.Paused, BreakerOpen: h.Breaker != pacer.BreakerClosed}
			if h.Queued > 0 {
				if at, ok, err := sp.Oldest(h.Host); err == nil && ok {
					hs.OldestAge = max(0, now.Sub(at).Seconds())
					st.OldestAge = max(st.OldestAge, hs.OldestAge)
				}
			}
			st.Hosts[i] = hs
		}
		return st
	})
}
