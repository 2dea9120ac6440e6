// Package server assembles hookpace from its parts (spool, dispatcher,
// proxy, admin API, telemetry) and runs it until its context ends: then it
// stops accepting, lets in-flight deliveries finish within the shutdown
// deadline, and closes the spool with everything queued left for the next
// start.
package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookpace/hookpace/admin"
	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/mitm"
	"github.com/hookpace/hookpace/pacer"
	"github.com/hookpace/hookpace/proxy"
	"github.com/hookpace/hookpace/spool"
	"github.com/hookpace/hookpace/telemetry"
	"go.opentelemetry.io/otel/sdk/trace"
)

// Options for Run.
type Options struct {
	Config *config.Config
	// Reload delivers reload requests (SIGHUP); the config file is also
	// watched. Nil: only the file watch.
	Reload <-chan struct{}
	// Ready, if set, is called with the bound addresses once both
	// listeners are up (tests use :0).
	Ready func(proxyAddr, adminAddr string)
	// SpanExporter overrides the configured trace exporter (tests).
	SpanExporter trace.SpanExporter
	// LogOutput is where logs go; default stderr.
	LogOutput *os.File
}

// Run runs hookpace until ctx is done, then shuts down gracefully.
func Run(ctx context.Context, o Options) error {
	cfg := o.Config
	out := o.LogOutput
	if out == nil {
		out = os.Stderr
	}
	logOut := telemetry.NewBufferedWriter(out, 100*time.Millisecond)
	defer logOut.Close()
	log, level, err := telemetry.NewLogger(logOut, cfg.Log.Format, cfg.Log.Level)
	if err != nil {
		return err
	}
	slog.SetDefault(log)

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
	defer tel.Shutdown(context.Background())

	var current atomic.Pointer[config.Config]
	current.Store(cfg)

	guard := &swapGuard{}
	if err := guard.set(cfg); err != nil {
		return err
	}
	roots, err := rootCAs(cfg.TLS.CAFile)
	if err != nil {
		return err
	}
	var ca *mitm.CA
	if cfg.MITM.Enabled() {
		if ca, err = mitm.LoadCA(cfg.MITM.CACert, cfg.MITM.CAKey, cfg.MITM.CacheSize); err != nil {
			return fmt.Errorf("mitm: %w", err)
		}
	}
	warnInsecure(log, cfg)

	sp, err := spool.Open(spool.Options{
		Dir:         cfg.Spool.Dir,
		MaxMessages: cfg.Spool.MaxMessages,
		MaxBytes:    int64(cfg.Spool.MaxBytes),
		HighWater:   cfg.Spool.HighWater,
		LowWater:    cfg.Spool.LowWater,
		MinFree:     int64(cfg.Spool.MinFree),
		Logger:      log,
	})
	if err != nil {
		return err
	}
	spoolClosed := false
	defer func() {
		if !spoolClosed {
			sp.Close()
		}
	}()
	disp := deliver.New(deliver.Options{
		Queue:    sp,
		Policy:   policies(cfg),
		Client:   deliveryClient(tel, guard, roots, false),
		Insecure: deliveryClient(tel, guard, roots, true),
		Logger:   log,
		Observer: tel.Metrics,
		Tracer:   tel.Tracer,
		Prop:     tel.Propagator,
		Throttle: telemetry.NewThrottle(10 * time.Second),
	})
	observe(tel.Metrics, disp, sp)

	px := proxy.New(proxy.Options{
		Config:    &current,
		Spool:     sp,
		Pacing:    disp,
		Guard:     guard,
		CA:        ca,
		Transport: transport(guard, roots, false),
		Logger:    log,
		Metrics:   tel.Metrics,
		Tracer:    tel.Tracer,
		Prop:      tel.Propagator,
		Tracing:   o.SpanExporter != nil || (cfg.Telemetry.Traces.Exporter != "" && cfg.Telemetry.Traces.Exporter != telemetry.TraceExporterNone),
	})

	proxyLn, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	adminLn, err := net.Listen("tcp", cfg.Admin)
	if err != nil {
		proxyLn.Close()
		return fmt.Errorf("admin listen %s: %w", cfg.Admin, err)
	}
	// Our own listeners are never a delivery target, whatever was allowed.
	guard.self = []string{proxyLn.Addr().String(), adminLn.Addr().String()}
	if err := guard.set(cfg); err != nil {
		return err
	}

	proxySrv := &http.Server{Handler: px, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	adminSrv := &http.Server{Handler: admin.Handler(admin.Options{Hosts: disp, Spool: sp, Metrics: tel.Handler(), Logger: log}),
		ReadHeaderTimeout: 10 * time.Second}

	// The dispatcher subscribes to the spool's announcements, picks up its
	// backlog, and pauses again the hosts an operator paused before a
	// restart.
	if err := disp.Start(); err != nil {
		return fmt.Errorf("start deliveries from the spool: %w", err)
	}
	errc := make(chan error, 2)
	go func() { errc <- serve(proxySrv, proxyLn) }()
	go func() { errc <- serve(adminSrv, adminLn) }()
	u := sp.Usage()
	log.Info("hookpace started", "listen", proxyLn.Addr().String(), "admin", adminLn.Addr().String(),
		"spool", cfg.Spool.Dir, "queued", u.Messages, "dead_letters", u.Dead, "hosts", u.Hosts, "paused", pausedHosts(disp), "mitm", ca != nil, "config", cfg.Path)
	if o.Ready != nil {
		o.Ready(proxyLn.Addr().String(), adminLn.Addr().String())
	}

	r := &reloader{path: cfg.Path, current: &current, log: log, level: level, guard: guard, spool: sp, disp: disp, proxy: px}
	watchDone := make(chan struct{})
	go func() { defer close(watchDone); r.watch(ctx, o.Reload) }()

	select {
	case <-ctx.Done():
	case err := <-errc:
		log.Error("listener failed", "error", err)
	}
	<-watchDone

	// Graceful shutdown: stop accepting, finish in-flight deliveries within
	// the deadline, then sync and close the spool.
	cfg = current.Load()
	log.Info("shutting down", "deadline", cfg.Shutdown.Timeout.D().String())
	deadline, cancel := context.WithTimeout(context.Background(), cfg.Shutdown.Timeout.D())
	defer cancel()
	// The proxy drains its open requests (each gets its answer) while the
	// dispatcher stops starting attempts and waits for those in flight.
	var wg sync.WaitGroup
	wg.Go(func() { proxySrv.Shutdown(deadline) })
	if err := disp.Stop(deadline); err != nil {
		log.Warn("shutdown deadline passed: in-flight deliveries abandoned, they stay queued", "error", err)
	}
	wg.Wait()
	adminSrv.Shutdown(deadline)
	left := sp.Usage()
	spoolClosed = true
	if err := closeSpool(sp, deadline); err != nil {
		return err
	}
	log.Info("hookpace stopped", "queued", left.Messages, "dead_letters", left.Dead)
	return nil
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

func serve(srv *http.Server, ln net.Listener) error {
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// policies turns a config into the dispatcher's per-host policy source.
func policies(cfg *config.Config) func(string) deliver.Policy {
	return func(host string) deliver.Policy {
		_, hc := cfg.Lookup(host)
		return Policy(hc)
	}
}

// Policy converts one host's config to its delivery policy.
func Policy(hc config.HostConfig) deliver.Policy {
	hold := make([]time.Duration, len(hc.HoldSchedule))
	for i, d := range hc.HoldSchedule {
		hold[i] = d.D()
	}
	return deliver.Policy{
		Limits: pacer.Limits{
			Rate:            hc.Rate.PerSecond(),
			Burst:           hc.Burst,
			Concurrency:     hc.Concurrency,
			Adaptive:        hc.Adaptive,
			MinRate:         hc.MinRate.PerSecond(),
			HoldSchedule:    hold,
			MaxRetryAfter:   hc.MaxRetryAfter.D(),
			BreakerFailures: hc.BreakerFailures,
			BreakerCooldown: hc.BreakerCooldown.D(),
		},
		Timeout:            hc.Timeout.D(),
		MaxAttempts:        hc.MaxAttempts,
		MaxAge:             hc.MaxAge.D(),
		BackoffInitial:     hc.BackoffInitial.D(),
		BackoffMax:         hc.BackoffMax.D(),
		Retry4xx:           hc.Retry4xx,
		UpgradeTLS:         hc.UpgradeTLS,
		InsecureSkipVerify: hc.InsecureSkipVerify,
	}
}

// rootCAs is the system pool (which honours SSL_CERT_FILE and
// SSL_CERT_DIR) plus the operator's extra CA file.
func rootCAs(extra string) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if extra != "" {
		pem, err := os.ReadFile(extra)
		if err != nil {
			return nil, fmt.Errorf("tls.ca_file: %w", err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls.ca_file %s: no PEM certificates found", extra)
		}
	}
	return pool, nil
}

// transport is an outbound transport that never reads proxy settings from
// the environment (hookpace's own HTTP_PROXY may point at itself), dials
// only what the egress guard allows, and verifies TLS.
func transport(guard *swapGuard, roots *x509.CertPool, insecure bool) *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           guard.DialContext,
		TLSClientConfig:       &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12, InsecureSkipVerify: insecure},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
	}
}

// deliveryClient sends webhooks: no redirects are followed (a redirect is a
// permanent failure), and requests are traced and measured.
func deliveryClient(tel *telemetry.Telemetry, guard *swapGuard, roots *x509.CertPool, insecure bool) *http.Client {
	return &http.Client{
		Transport:     tel.WrapTransport(transport(guard, roots, insecure)),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func warnInsecure(log *slog.Logger, cfg *config.Config) {
	if cfg.Defaults.InsecureSkipVerify {
		log.Warn("!!! INSECURE: defaults.insecure_skip_verify is true: upstream TLS certificates are NOT verified for any host without its own setting !!!")
	}
	for k, hc := range cfg.Hosts {
		if hc.InsecureSkipVerify {
			log.Warn("!!! INSECURE: upstream TLS certificates are NOT verified for this host !!!", "host", k)
		}
	}
}

// pausedHosts counts the hosts an operator paused.
func pausedHosts(disp *deliver.Dispatcher) int {
	n := 0
	for _, h := range disp.Hosts() {
		if h.Paused {
			n++
		}
	}
	return n
}

// observe feeds the gauges from the dispatcher and spool at scrape time.
func observe(m *telemetry.Metrics, disp *deliver.Dispatcher, sp *spool.Spool) {
	m.ObserveSpool(func() telemetry.SpoolSnapshot {
		u := sp.Usage()
		return telemetry.SpoolSnapshot{Messages: u.Messages, Bytes: u.Bytes}
	})
	m.ObserveHosts(func() []telemetry.HostSnapshot {
		hosts := disp.Hosts()
		out := make([]telemetry.HostSnapshot, len(hosts))
		for i, h := range hosts {
			out[i] = telemetry.HostSnapshot{Host: h.Host, Queued: h.Queued, QueuedBytes: h.QueuedBytes,
				InFlight: h.InFlight, Rate: h.Rate, Held: h.HeldUntil != nil || h.Paused}
		}
		return out
	})
}
