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
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hookpace/hookpace/catchup"
	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/connlimit"
	"github.com/hookpace/hookpace/inbound"
	"github.com/hookpace/hookpace/proxy"
	"github.com/hookpace/hookpace/sign"
)

// inboundRoutes are the listeners in front of apps' own webhook endpoints
// (config inbound), bound by build and served with the proxy.
type inboundRoutes struct {
	log    *slog.Logger
	routes []inboundListener
	// catchUps run from serve until shutdown, which stops them before the
	// spool closes.
	catchUps []*catchup.Runner
	stop     context.CancelFunc
	running  sync.WaitGroup
}

type inboundListener struct {
	name string
	to   string
	tls  bool
	ln   net.Listener
	srv  *http.Server
}

// buildInbound binds each inbound route's listener and makes its handler:
// verified webhooks go to the proxy's ingest, the rest to the app over a
// transport of its own that dials through the egress guard.
func (a *app) buildInbound(cfg *config.Config, roots *x509.CertPool) error {
	a.inbound = &inboundRoutes{log: a.log}
	if len(cfg.Inbound) == 0 {
		return nil
	}
	appTransport := transport(a.guard, roots, false, oneHostIdle)
	files := a.files.Load()
	for _, rc := range cfg.Inbound {
		v := files.verifiers[rc.Verify]
		app, err := inbound.NewApp(rc.To, appTransport, a.log)
		if err != nil {
			return cfg.FieldError("inbound", err)
		}
		h, err := inbound.NewRoute(inbound.Options{Route: rc, Verifier: v, Ingest: a.proxy, App: app,
			Metrics: a.tel.Metrics, Logger: a.log, MaxBody: int64(cfg.Spool.MaxBody),
			BodyTimeout: cfg.Proxy.BodyTimeout.D(), Seen: a.spool})
		if err != nil {
			return cfg.FieldError("inbound", err)
		}
		if rc.CatchUp != nil {
			cu, err := catchup.New(catchup.Options{Route: rc.Name, Config: *rc.CatchUp, Door: h,
				StateDir: filepath.Join(cfg.Spool.Dir, "catchup"), Logger: a.log})
			if err != nil {
				return cfg.FieldError("inbound", err)
			}
			a.inbound.catchUps = append(a.inbound.catchUps, cu)
		}
		ln, err := net.Listen("tcp", rc.Listen)
		if err != nil {
			return fmt.Errorf("inbound route %s: listen %s: %w", rc.Name, rc.Listen, err)
		}
		ln = connlimit.New(ln, maxConnections(cfg), a.log, "inbound "+rc.Name)
		a.undo = append(a.undo, func() { ln.Close() })
		if rc.CertFile != "" {
			cert, err := tls.LoadX509KeyPair(rc.CertFile, rc.KeyFile)
			if err != nil {
				return fmt.Errorf("inbound route %s: load cert_file and key_file: %w", rc.Name, err)
			}
			ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
		}
		ln = proxy.TapListener(ln) // the door's judge reads an HTTP/1.0 request's raw header (proxy/strict.go)
		scheme := "http"
		if rc.CertFile != "" {
			scheme = "https"
		}
		srv := &http.Server{Handler: a.tel.WrapServer(a.proxy.Strict(rc.Name, h), scheme), ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second,
			MaxHeaderBytes: int(cfg.Spool.MaxHeader), ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelDebug),
			ConnContext: proxy.TapContext}
		if bt := cfg.Proxy.BodyTimeout.D(); bt > 0 {
			srv.ReadTimeout = bt + srv.ReadHeaderTimeout
		}
		a.inbound.routes = append(a.inbound.routes, inboundListener{name: rc.Name, to: rc.To, tls: rc.CertFile != "", ln: ln, srv: srv})
	}
	// The routes' listeners are hookpace itself, never a destination; each
	// app is open to egress on its own host and port alone.
	var self, apps []string
	for _, r := range a.inbound.routes {
		self = append(self, r.ln.Addr().String())
	}
	for _, ap := range inboundApps(cfg) {
		apps = append(apps, net.JoinHostPort(ap.Host, strconv.Itoa(int(ap.Port))))
	}
	return a.guard.Inbound(self, apps)
}

// inboundVerifiers builds the verifier of each inbound route that verifies,
// reading its secret.
func inboundVerifiers(cfg *config.Config) (map[*config.InboundVerify]*inbound.Verifier, error) {
	out := map[*config.InboundVerify]*inbound.Verifier{}
	var errs []error
	for _, rc := range cfg.Inbound {
		v, err := inboundVerifier(cfg.Path, rc.Verify)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[rc.Verify] = v
	}
	return out, errors.Join(errs...)
}

// inboundVerifier reads a route's verify secret and builds its verifier;
// nil without a verify block. Errors name the field, never the secret.
func inboundVerifier(path string, vc *config.InboundVerify) (*inbound.Verifier, error) {
	if vc == nil {
		return nil, nil
	}
	fieldErr := func(err error) error {
		return &config.FieldError{File: path, Line: vc.Secret.Line, Field: vc.Secret.Field, Msg: err.Error()}
	}
	var text string
	switch vc.Secret.Kind {
	case "file":
		b, err := os.ReadFile(vc.Secret.Name)
		if err != nil {
			return nil, fieldErr(err)
		}
		text = string(b)
	case "env":
		text = os.Getenv(vc.Secret.Name)
	}
	key, pub, err := inbound.ParseVerifySecret(vc.Scheme, text)
	if err != nil {
		return nil, fieldErr(fmt.Errorf("%s: %w", vc.Secret, err))
	}
	v, err := inbound.NewVerifier(inbound.VerifyOptions{Scheme: vc.Scheme, Secret: key, Public: pub, Tolerance: vc.Tolerance.D(),
		Header: vc.Header, Algorithm: vc.Algorithm, Encoding: vc.Encoding, Prefix: vc.Prefix})
	if err != nil {
		return nil, &config.FieldError{File: path, Line: vc.Line, Field: vc.Field, Msg: err.Error()}
	}
	return v, nil
}

// serve serves each route, logging its bound address first ("inbound
// listening", before "hookpace started"), then starts the routes'
// catch-ups. A route whose listener fails is logged; the others and the
// proxy go on.
func (ir *inboundRoutes) serve() {
	defer ir.catchUp()
	for _, r := range ir.routes {
		ir.log.Info("inbound listening", "route", r.name, "listen", r.ln.Addr().String(), "to", r.to, "tls", r.tls)
		go func() {
			if err := r.srv.Serve(r.ln); !errors.Is(err, http.ErrServerClosed) {
				ir.log.Error("inbound listener failed", "route", r.name, "error", err)
			}
		}()
	}
}

// catchUp starts each route's catch-up.
func (ir *inboundRoutes) catchUp() {
	ctx, cancel := context.WithCancel(context.Background())
	ir.stop = cancel
	for _, cu := range ir.catchUps {
		ir.running.Add(1)
		go func() {
			defer ir.running.Done()
			cu.Run(ctx)
		}()
	}
}

// shutdown stops the catch-ups, then taking requests on every route, and
// waits, until ctx ends, for those in progress.
func (ir *inboundRoutes) shutdown(ctx context.Context) {
	if ir == nil {
		return
	}
	if ir.stop != nil {
		ir.stop()
		stopped := make(chan struct{})
		go func() {
			ir.running.Wait()
			close(stopped)
		}()
		select {
		case <-stopped:
		case <-ctx.Done():
		}
	}
	for _, r := range ir.routes {
		r.srv.Shutdown(ctx)
	}
}

// doorSigners are the inbound routes' signers by route name: what signs a
// webhook that route's door took in (nil for a route without sign).
func doorSigners(cfg *config.Config, files *Files) map[string]*sign.Signer {
	out := make(map[string]*sign.Signer, len(cfg.Inbound))
	for _, rt := range cfg.Inbound {
		out[rt.Name] = files.Signer(rt.Sign)
	}
	return out
}

// inboundApps are the inbound routes' apps, each target of each route,
// which the proxy's doors refuse (config checked their URLs).
func inboundApps(cfg *config.Config) []proxy.App {
	var out []proxy.App
	for _, rt := range cfg.Inbound {
		for _, t := range rt.Targets {
			if a, err := proxy.NewApp(rt.Name, t.URL); err == nil {
				out = append(out, a)
			}
		}
	}
	return out
}
