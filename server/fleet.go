package server

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/hookpace/hookpace/admin"
	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/fleet"
	"github.com/hookpace/hookpace/spool"
	"github.com/hookpace/hookpace/telemetry"
)

// newFleet returns the fleet limiter of cfg, or nil without a fleet
// section. It does not connect: a Redis that is down at start makes the
// replica pace on its share until Redis answers.
func newFleet(cfg *config.Config, password string, log *slog.Logger, m *telemetry.Metrics) (*fleet.Limiter, error) {
	f := cfg.Fleet
	if !f.Enabled() {
		return nil, nil
	}
	var obs fleet.Observer
	if m != nil {
		obs = m
	}
	l, err := fleet.New(fleet.Options{URL: f.Redis, Cluster: f.Cluster,
		SentinelMaster: f.SentinelMaster, SentinelAddrs: f.SentinelAddrs, TLS: f.TLS, Password: password, KeyPrefix: f.KeyPrefix,
		Replica: f.Replica, Timeout: f.Timeout.D(), LeasePeriod: f.LeasePeriod.D(), Logger: log, Observer: obs})
	if err != nil {
		return nil, err
	}
	log.Info("fleet mode", "redis", f.RedactedURL(), "key_prefix", f.KeyPrefix, "replica", l.Replica(),
		"lease_period", f.LeasePeriod.D().String())
	return l, nil
}

// fleetView is a replica's side of the fleet's view (fleet/view.go): it
// counts the webhooks delivered per host (wrapping the dispatcher's
// observer) and summarizes its hosts for the heartbeat to publish.
type fleetView struct {
	deliver.Observer
	mu        sync.Mutex
	delivered map[string]deliveredCount
}

type deliveredCount struct {
	n  int64
	at time.Time // the last one
}

// viewQuiet is how long a host with nothing queued, in flight, held,
// paused or dead stays in the view after its last delivery.
const viewQuiet = 10 * time.Minute

// observer wraps obs to count deliveries for the fleet's view; obs itself
// without a fleet.
func (a *app) observer(obs deliver.Observer) deliver.Observer {
	if a.fleet == nil {
		return obs
	}
	a.view = &fleetView{Observer: obs, delivered: map[string]deliveredCount{}}
	return a.view
}

// Delivery counts a delivered attempt and passes it on.
func (v *fleetView) Delivery(ctx context.Context, host string, o deliver.Outcome) {
	v.Observer.Delivery(ctx, host, o)
	if o != deliver.OutcomeDelivered {
		return
	}
	v.mu.Lock()
	c := v.delivered[host]
	v.delivered[host] = deliveredCount{n: c.n + 1, at: time.Now()}
	v.mu.Unlock()
}

// publishView has the fleet's heartbeat publish this replica's summary.
func (a *app) publishView() {
	if a.fleet == nil || a.view == nil {
		return
	}
	a.fleet.Summarize(func() []fleet.HostSummary { return a.view.summary(a.disp.Hosts(), a.spool) })
}

// fleetViewer is the fleet's view for the admin API; nil without a fleet.
func (a *app) fleetViewer() admin.FleetView {
	if a.fleet == nil {
		return nil
	}
	return a.fleet
}

// summary is this replica's hosts with anything to say: queued, in
// flight, held, paused, breaker not closed, dead letters, or a delivery
// within viewQuiet.
func (v *fleetView) summary(hosts []deliver.HostStatus, sp *spool.Spool) []fleet.HostSummary {
	dead, _ := sp.DeadByHost()
	now := time.Now()
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]fleet.HostSummary, 0, len(hosts))
	for _, h := range hosts {
		s := fleet.HostSummary{Host: h.Host, Queued: h.Queued, InFlight: h.InFlight, Paused: h.Paused,
			Dead: dead[h.Host], Delivered: v.delivered[h.Host].n}
		if h.HeldUntil != nil && h.HeldUntil.After(now) {
			s.Held = cmp.Or(h.HoldReason, "held")
		}
		if h.Breaker != "" && h.Breaker != "closed" {
			s.Breaker = h.Breaker
		}
		quiet := s.Queued == 0 && s.InFlight == 0 && s.Held == "" && !s.Paused && s.Breaker == "" && s.Dead == 0
		if quiet && now.Sub(v.delivered[h.Host].at) > viewQuiet {
			continue
		}
		out = append(out, s)
	}
	return out
}
