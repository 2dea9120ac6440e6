package server

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/hookpace/hookpace/admin"
)

// instance says which hookpace this is, for GET /v1/instance and hookpace
// status.
func (a *app) instance() admin.Instance {
	cfg := a.current.Load()
	return admin.Instance{
		PID:       os.Getpid(),
		StartedAt: a.started.UTC(),
		SpoolDir:  cfg.Spool.Dir,
		Listen:    a.proxyLn.Addr().String(),
		Admin:     a.adminLn.Addr().String(),
		Config:    cfg.Path,
		Ingest:    a.proxy.Counts(),
		HTTPS:     a.trust.status(cfg, a.proxy.Tunnels(), a.proxy.Forwarded()),
	}
}

// trafficReportAfter is how long after the start the traffic line is
// logged.
const trafficReportAfter = time.Minute

// reportTraffic logs, after a while (unless ctx ends first), what came
// through the proxy since the start, and warns when nothing did: an app
// whose HTTP_PROXY is not set, or whose client ignores it, sends its
// webhooks straight to the partner, and nothing else would say so.
func reportTraffic(ctx context.Context, log *slog.Logger, after time.Duration, listen string, counts func() map[string]int64) {
	t := time.NewTimer(after)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	c := counts()
	var total int64
	for _, n := range c {
		total += n
	}
	window := after.String()
	if total == 0 {
		log.Warn("nothing came through hookpace since it started: is the app's HTTP_PROXY http://"+listen+
			", and does its HTTP client use it? (docs/languages.md)", "since", window)
		return
	}
	log.Info("traffic since start", "since", window, "requests", total, "spooled", c["accepted"],
		"passthrough", c["passthrough"], "other", total-c["accepted"]-c["passthrough"])
}
