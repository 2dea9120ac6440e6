// Package server assembles hookpace from its parts (spool, dispatcher,
// proxy, admin API, telemetry) and runs it in three steps: build makes the
// parts and connects them, serve serves until its context ends, and
// shutdown refuses new webhooks, drains and hands off what is queued as
// configured, lets in-flight deliveries finish within the shutdown
// deadline, and closes the spool with whatever is left for the next start.
package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/hookpace/hookpace/admin"
	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/egress"
	"github.com/hookpace/hookpace/events"
	"github.com/hookpace/hookpace/fleet"
	"github.com/hookpace/hookpace/internal/memtarget"
	"github.com/hookpace/hookpace/journal"
	"github.com/hookpace/hookpace/mitm"
	"github.com/hookpace/hookpace/proxy"
	"github.com/hookpace/hookpace/replicate"
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
	a, err := build(ctx, o)
	if err != nil {
		return err
	}
	defer a.release()
	a.serve(ctx, o.Reload, o.Ready)
	return a.shutdown()
}

// app is hookpace as build made it: every part connected to the others,
// both listeners bound, deliveries started, nothing served yet.
type app struct {
	log     *slog.Logger
	level   *slog.LevelVar
	current atomic.Pointer[config.Config] // in force; a reload swaps it
	tel     *telemetry.Telemetry
	guard   *egress.Swap
	ca      *mitm.CA              // the operator's (mitm.ca_cert), from LoadFiles
	files   atomic.Pointer[Files] // what the config in force names; a reload swaps it
	trust   *intercept
	spool   *spool.Spool
	journal *journal.Journal // the spool's history (its History)
	disp    *deliver.Dispatcher
	proxy   *proxy.Proxy
	fleet   *fleet.Limiter  // nil without a fleet section
	view    *fleetView      // the fleet's view: deliveries counted (fleet.go); nil without a fleet
	history *admin.History  // the status page's last 15 minutes, sampled while serving
	events  *events.Emitter // operational events (events.go); nil without events.url
	inbound *inboundRoutes  // listeners in front of apps (inbound.go)
	repl    *replicate.NATS // the spool's copy off this node (replicate.go); nil without one

	started            time.Time // when build began
	proxyLn, adminLn   net.Listener
	captureLn          net.Listener // capture.listen; nil when off (capture.go)
	proxySrv, adminSrv *http.Server

	spoolClosing bool        // shutdown closes the spool (see closeSpool)
	stopping     atomic.Bool // set when shutdown begins: /readyz fails

	// undo closes, in reverse order, what build opened: all of it after a
	// failed build; on exit, what shutdown leaves (see release).
	undo []func()
}

// release runs undo.
func (a *app) release() {
	for i := len(a.undo) - 1; i >= 0; i-- {
		a.undo[i]()
	}
	a.undo = nil
}

// serve serves the proxy and the admin API, and applies config reloads,
// until ctx is done or a listener fails.
func (a *app) serve(ctx context.Context, reload <-chan struct{}, ready func(proxyAddr, adminAddr string)) {
	a.history.Sample(time.Now()) // the history counts from here, before any webhook comes in
	errc := make(chan error, 3)
	go func() { errc <- serveHTTP(a.proxySrv, a.proxyLn) }()
	go func() { errc <- serveHTTP(a.adminSrv, a.adminLn) }()
	a.inbound.serve()
	go func() {
		if err := a.serveCapture(); err != nil {
			errc <- err
		}
	}()
	cfg, u := a.current.Load(), a.spool.Usage()
	proxyAddr, adminAddr := a.proxyLn.Addr().String(), a.adminLn.Addr().String()
	https := a.trust.status(cfg, nil, nil)
	captureAddr := ""
	if a.captureLn != nil {
		captureAddr = a.captureLn.Addr().String()
	}
	a.log.Info("hookpace started", "listen", proxyAddr, "admin", adminAddr, "capture", captureAddr,
		"spool", cfg.Spool.Dir, "queued", u.Messages, "dead_letters", u.Dead, "hosts", u.Hosts, "paused", pausedHosts(a.disp),
		"mitm_ca", https.CA, "trust_bundle", https.Bundle, "config", cfg.Path)
	logResume(a.log, u, pausedHosts(a.disp))
	for _, w := range cfg.PlainTokenURLs() {
		a.log.Warn("auth: a token endpoint over plain http", "problem", w)
	}
	for _, w := range cfg.InboundWarnings() {
		a.log.Warn("inbound: a dedupe key that does not resist replay", "problem", w)
	}
	if ready != nil {
		ready(proxyAddr, adminAddr)
	}
	go memtarget.ReleaseStartup() // start-up's garbage and the executable's pages it read

	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	r := &reloader{path: cfg.Path, current: &a.current, files: &a.files, log: a.log, level: a.level, guard: a.guard, tel: a.tel,
		spool: a.spool, disp: a.disp, proxy: a.proxy, trust: a.trust}
	go reportTraffic(watchCtx, a.log, trafficReportAfter, proxyAddr, a.proxy.Counts)
	go a.history.Run(watchCtx) // stops with the watch, before shutdown
	// Events are found while serving only: shutdown hands off what came before.
	eventsDone := make(chan struct{})
	go func() { defer close(eventsDone); a.watchEvents(watchCtx) }()
	watchDone := make(chan struct{})
	go func() { defer close(watchDone); r.watch(watchCtx, reload) }()
	select {
	case <-ctx.Done():
	case err := <-errc:
		a.log.Error("listener failed", "error", err)
	}
	stopWatch()
	<-watchDone
	<-eventsDone
}

func serveHTTP(srv *http.Server, ln net.Listener) error {
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
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

// logResume says, when hookpace starts on a spool that a previous run left
// webhooks or dead letters in, how many it resumes: after a crash, a
// shutdown that could not drain or hand everything off, or a pod
// rescheduled onto the same volume.
func logResume(log *slog.Logger, u spool.Usage, paused int) {
	if u.Messages == 0 && u.Dead == 0 {
		return
	}
	log.Info("resuming the spool of a previous run", "webhooks", u.Messages, "hosts", u.Hosts,
		"dead_letters", u.Dead, "paused_hosts", paused)
}
