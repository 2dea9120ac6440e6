package server

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/spool"
	"github.com/hookpace/hookpace/telemetry"
)

// observe feeds the gauges from the dispatcher and spool at scrape time.
func observe(m *telemetry.Metrics, disp *deliver.Dispatcher, sp *spool.Spool) {
	m.ObserveSpool(func() telemetry.SpoolSnapshot {
		u := sp.Usage()
		return telemetry.SpoolSnapshot{Messages: u.Messages, Bytes: u.Bytes, DedupeKeys: u.DedupeKeys, DedupeBytes: u.DedupeBytes}
	})
	m.ObserveHosts(func() []telemetry.HostSnapshot {
		hosts := disp.HostGauges()
		out := make([]telemetry.HostSnapshot, len(hosts))
		for i, h := range hosts {
			out[i] = telemetry.HostSnapshot{Host: h.Host, Queued: h.Queued, QueuedBytes: h.QueuedBytes,
				InFlight: h.InFlight, Rate: h.Rate, Held: h.Held, ConcurrencyLimit: h.ConcurrencyLimit}
		}
		return out
	})
}

// observeState feeds the gauges behind the shipped alert rules and
// dashboard (deploy/) at scrape time: admission state, readiness by the
// rule /readyz applies (spool.Usage.Ready), and the age of the oldest queued message, which
// costs one read of a record's head per host with a backlog.
func observeState(m *telemetry.Metrics, disp *deliver.Dispatcher, sp *spool.Spool, stopping func() bool) {
	m.ObserveState(func() telemetry.StateSnapshot {
		now, u := time.Now(), sp.Usage()
		st := telemetry.StateSnapshot{MaxMessages: u.MaxMessages, MaxBytes: u.MaxBytes,
			HighWater: u.HighWater, LowWater: u.LowWater, Usage: u.Fraction, Accepting: u.Accepting,
			DeadLetters: u.Dead}
		if u.Dead > 0 {
			var err error
			if st.DeadByHost, err = sp.DeadByHost(); err != nil {
				slog.Warn("metrics scrape", "err", fmt.Errorf("dead letters per host: %w", err))
			}
		}
		if u.Refusal != spool.RefusalClosed {
			st.Refusing = u.Refusal.String() // a telemetry.Refusing* reason, or ""
		}
		st.Ready, _ = u.Ready(stopping())
		hosts := disp.HostGauges()
		st.Hosts = make([]telemetry.HostState, len(hosts))
		for i, h := range hosts {
			hs := telemetry.HostState{Host: h.Host, Paused: h.Paused, BreakerOpen: h.BreakerOpen}
			if h.Queued > 0 {
				if at, ok, err := sp.Oldest(h.Host); err != nil {
					slog.Warn("metrics scrape", "host", h.Host, "err", fmt.Errorf("oldest message: %w", err))
				} else if ok {
					hs.OldestAge = max(0, now.Sub(at).Seconds())
					st.OldestAge = max(st.OldestAge, hs.OldestAge)
				}
			}
			st.Hosts[i] = hs
		}
		return st
	})
}
