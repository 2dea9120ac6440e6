package server

import (
	"log/slog"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/fleet"
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
