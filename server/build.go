package server

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/hookpace/hookpace/admin"
	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/connlimit"
	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/egress"
	"github.com/hookpace/hookpace/fleet"
	"github.com/hookpace/hookpace/internal/memtarget"
	"github.com/hookpace/hookpace/journal"
	"github.com/hookpace/hookpace/proxy"
	"github.com/hookpace/hookpace/spool"
	"github.com/hookpace/hookpace/telemetry"
)

// build makes every part of hookpace from o.Config and connects them. If a
// part fails, what was already made is closed again.
func build(ctx context.Context, o Options) (_ *app, err error) {
	cfg := o.Config
	a := &app{started: time.Now()}
	a.current.Store(cfg)
	// Every view of a URL from now on, the journal's first records too.
	if err := spool.SetRedactPaths(cfg.Journal.RedactPaths); err != nil {
		return nil, fmt.Errorf("journal.redact_paths: %w", err)
	}
	defer func() {
		if err != nil {
			a.release()
		}
	}()
	if err := a.buildTelemetry(ctx, o); err != nil {
		return nil, err
	}
	files, err := LoadFiles(cfg)
	if err != nil {
		return nil, err
	}
	roots := files.Roots
	a.ca = files.CA
	a.files.Store(files)
	warnInsecure(a.log, cfg)
	if !memtarget.Set(int64(cfg.Memory.Target)) && cfg.Memory.Target > 0 {
		a.log.Info("memory.target not applied: GOMEMLIMIT is set and wins", "GOMEMLIMIT", os.Getenv("GOMEMLIMIT"))
	}
	if err := a.connectReplica(ctx, cfg); err != nil {
		return nil, err
	}
	sopts := spoolOptions(cfg, a.log)
	if a.repl != nil {
		sopts.Replica, sopts.ReplicaName = a.repl, replicaName(cfg)
	}
	if a.spool, a.journal, err = journal.OpenSpool(sopts, journalOptions(cfg)); err != nil {
		return nil, err
	}
	a.undo = append(a.undo, func() {
		if !a.spoolClosing {
			a.spool.Close()
		}
	})
	a.startEvents(cfg)
	// hookpace's own CA lives in the spool directory, which the open spool
	// holds for this process alone.
	a.trust = &intercept{log: a.log}
	if _, err := a.trust.apply(cfg, a.ca); err != nil {
		return nil, cfg.FieldError("mitm", err)
	}
	if err := a.listen(cfg); err != nil {
		return nil, err
	}
	// Our own listeners are never a delivery target, whatever was allowed.
	if a.guard, err = egress.NewSwap(cfg.Egress.Allow, cfg.Egress.Deny, a.selfAddrs()...); err != nil {
		return nil, err
	}
	files.bindCredentials(a.tel, a.guard, roots)
	if a.fleet, err = newFleet(cfg, files.RedisPassword, a.log, a.tel.Metrics); err != nil {
		return nil, err
	}
	if a.fleet != nil {
		// The spool part of this replica's ids and its admin API, for the
		// fleet's answer to an id of another replica (msg show).
		a.fleet.Identify(a.spool.Instance(), a.adminLn.Addr().String())
		a.fleet.Start()
		a.undo = append(a.undo, func() { a.fleet.Close() })
	}
	ag, err := adminGuard(a.log, cfg, files.AdminToken, a.adminLn)
	if err != nil {
		return nil, err
	}
	a.buildParts(cfg, roots, ag)
	if err := a.buildInbound(cfg, roots); err != nil {
		return nil, err
	}
	if err := a.startReplica(ctx); err != nil {
		return nil, err
	}
	// The dispatcher subscribes to the spool's announcements, picks up its
	// backlog, and pauses again the hosts an operator paused before a
	// restart.
	if err := a.disp.Start(); err != nil {
		return nil, fmt.Errorf("start deliveries from the spool: %w", err)
	}
	return a, nil
}

// buildTelemetry sets up logging (the default slog logger too), metrics
// and traces.
func (a *app) buildTelemetry(ctx context.Context, o Options) error {
	cfg := o.Config
	out := o.LogOutput
	if out == nil {
		out = os.Stderr
	}
	logOut := telemetry.NewBufferedWriter(out, 100*time.Millisecond)
	a.undo = append(a.undo, func() { logOut.Close() })
	log, level, err := telemetry.NewLogger(logOut, cfg.Log.Format, cfg.Log.Level)
	if err != nil {
		return err
	}
	slog.SetDefault(log)
	a.log, a.level = log, level
	tel, err := telemetry.Setup(ctx, telemetry.Options{
		MaxHostLabels:       cfg.Telemetry.MaxHostLabels,
		MetricsOTLPEndpoint: cfg.Telemetry.MetricsOTLPEndpoint,
		TraceExporter:       cfg.Telemetry.Traces.Exporter,
		TraceEndpoint:       cfg.Telemetry.Traces.Endpoint,
		SampleRatio:         cfg.Telemetry.Traces.SampleRatio,
		SpanExporter:        o.SpanExporter,
	})
	if err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	a.tel = tel
	a.undo = append(a.undo, func() { tel.Shutdown(context.Background()) })
	return nil
}

func spoolOptions(cfg *config.Config, log *slog.Logger) spool.Options {
	return spool.Options{
		Dir:         cfg.Spool.Dir,
		MaxMessages: cfg.Spool.MaxMessages,
		MaxBytes:    int64(cfg.Spool.MaxBytes),
		HighWater:   cfg.Spool.HighWater,
		LowWater:    cfg.Spool.LowWater,
		MinFree:     int64(cfg.Spool.MinFree),
		Logger:      log,

		DedupeMaxKeys:  cfg.Dedupe.MaxKeys,
		DedupeMaxBytes: int64(cfg.Dedupe.MaxBytes),
	}
}

// journalOptions are the journal's options from cfg.
func journalOptions(cfg *config.Config) journal.Options {
	return journal.Options{Off: cfg.Journal.Off, Retain: cfg.Journal.Retain.D(),
		MaxBytes: int64(cfg.Journal.MaxBytes), ResponseBody: int(cfg.Journal.ResponseBody), Bodies: cfg.Journal.Bodies}
}

// listen binds the proxy and admin listeners.
func (a *app) listen(cfg *config.Config) error {
	var err error
	if a.proxyLn, err = net.Listen("tcp", cfg.Listen); err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	// Reads re-arm TCP_QUICKACK while an ACK may be pending
	// (quickack_linux.go), and connections are limited (maxConnections).
	a.proxyLn = proxy.TapListener(connlimit.New(quickAckListener{a.proxyLn}, maxConnections(cfg), a.log, "proxy"))
	a.undo = append(a.undo, func() { a.proxyLn.Close() })
	if a.adminLn, err = net.Listen("tcp", cfg.Admin); err != nil {
		return fmt.Errorf("admin listen %s: %w", cfg.Admin, err)
	}
	a.adminLn = connlimit.Quiet(a.adminLn, a.log, "admin")
	a.undo = append(a.undo, func() { a.adminLn.Close() })
	return a.listenCapture(cfg)
}

// buildParts makes the dispatcher, the proxy and the two HTTP servers.
func (a *app) buildParts(cfg *config.Config, roots *x509.CertPool, ag *admin.Guard) {
	tel, log := a.tel, a.log
	var gates deliver.Gates // nil: every host paces alone
	if a.fleet != nil {
		gates = fleet.NewGates(a.fleet, log)
	}
	a.disp = deliver.New(deliver.Options{
		Reader:   a.spool,
		Store:    a.spool,
		Stats:    a.spool,
		Journal:  a.journal,
		Policy:   policies(cfg, a.files.Load()),
		Client:   deliveryClient(tel, a.guard, roots, false, deliveryIdle(cfg)),
		Insecure: deliveryClient(tel, a.guard, roots, true, deliveryIdle(cfg)),
		Logger:   log,
		Observer: a.observer(tel.Metrics),
		Tracer:   tel.Tracer,
		Prop:     tel.Propagator,
		Throttle: telemetry.NewThrottle(10 * time.Second),
		Gates:    gates,
		Events:   a.eventsHook(),

		MaxInFlight: cfg.Delivery.MaxInFlight,
	})
	// The metrics read snapshots, as the page and the API do
	// (admin.TakeSnapshot), taken at scrape time.
	observe(tel.Metrics, a.disp, a.spool)
	observeState(tel.Metrics, a.disp, a.spool, a.stopping.Load)
	a.publishView()
	a.proxy = proxy.New(proxy.Options{
		Policy:    proxyPolicy(cfg, a.files.Load()),
		Spool:     a.spool,
		Pacing:    a.disp,
		Guard:     a.guard,
		CA:        a.trust.CA(),
		Transport: transport(a.guard, roots, false, deliveryIdle(cfg)),
		Logger:    log,
		Metrics:   tel.Metrics,
		Tracer:    tel.Tracer,
		Prop:      tel.Propagator,
		Tracing:   tel.Tracing(),
		Door:      func(h http.Handler) http.Handler { return tel.WrapServer(h, "") },

		HostStates: a.disp,
	})
	a.proxySrv = &http.Server{Handler: a.proxy, ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout: 120 * time.Second, MaxHeaderBytes: int(cfg.Spool.MaxHeader),
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug), ConnContext: proxy.TapContext}
	a.history = admin.NewHistory(admin.HistorySource{
		Accepted:  func() int64 { return a.proxy.Counts()[proxy.OutcomeAccepted.String()] },
		Delivered: a.disp.Delivered,
		Queued:    func() int64 { return a.spool.Usage().Messages },
		Hosts:     a.disp.HostGauges,
	})
	a.adminSrv = &http.Server{Handler: adminHandler(admin.Options{Hosts: a.disp, Spool: a.spool, Journal: a.journal, Metrics: tel.Handler(), Logger: log, Guard: ag,
		Stopping: a.stopping.Load, Instance: a.instance, Fleet: a.fleetViewer(), History: a.history,
		Replication: a.replicationStatus()}, &a.current),
		ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
}

// maxConnections is proxy.max_connections, or when 0 half the open-file
// limit, between 16 and 16384. What one client, or a flood of them, can
// take of the proxy listener is bounded: its open connections (so that
// the admin listener, the spool and deliveries always have file
// descriptors; see package connlimit) and the time a request's body may
// take (proxy.body_timeout).
func maxConnections(cfg *config.Config) int {
	if n := cfg.Proxy.MaxConnections; n > 0 {
		return n
	}
	return min(max(openFileLimit()/2, 16), 16384)
}
