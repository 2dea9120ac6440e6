package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/hookpace/hookpace/inject"
	"github.com/hookpace/hookpace/injector"
)

// injectorMemoryLimit is the injector's soft Go memory limit unless
// GOMEMLIMIT says otherwise: half the chart's 128 MiB limit.
const injectorMemoryLimit = 64 << 20

// injectorCmd serves the admission webhook until SIGTERM or SIGINT.
func injectorCmd(args []string, stderr io.Writer) error {
	o := inject.Defaults()
	fs := newFlags("injector")
	var cidrs, services, spoolDirs listFlag
	listen := fs.String("listen", ":8443", "`ADDR` to serve HTTPS on")
	certFile := fs.String("tls-cert", "", "serving certificate `FILE` (PEM), for the webhook's Service name")
	keyFile := fs.String("tls-key", "", "its key `FILE` (PEM)")
	ns := fs.String("namespace", os.Getenv("POD_NAMESPACE"), "the injector's own `NAMESPACE`, whose pods are never injected (default $POD_NAMESPACE)")
	fs.BoolVar(&o.HandoffConfigured, "handoff-configured", false, "the ConfigMap's config.yaml sets shutdown.handoff (Jobs' pods are then injected)")
	fs.Var(&spoolDirs, "allow-spool-dir", "a `DIR` a Pod's hookpace.dev/spool-dir annotation may name besides --spool-dir (repeatable)")
	injectFlags(fs, &o, &cidrs, &services)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{"unexpected argument " + fs.Arg(0)}
	}
	if *certFile == "" || *keyFile == "" {
		return usageError{"--tls-cert and --tls-key are required: the API server calls webhooks over HTTPS only"}
	}
	o.CIDRs = append(cidrs, services...)
	if _, err := inject.New(o); err != nil {
		return err
	}
	for i, d := range spoolDirs {
		if !strings.HasPrefix(d, "/") {
			return usageError{fmt.Sprintf("--allow-spool-dir %q: want an absolute path", d)}
		}
		spoolDirs[i] = path.Clean(d)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		// A review's work is garbage at once: collect it before the heap
		// doubles, so that the injector's peak stays near what it holds.
		debug.SetMemoryLimit(injectorMemoryLimit)
	}
	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		return fmt.Errorf("loading the serving certificate: %w", err)
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           injector.Handler(injector.Options{Inject: o, Namespace: *ns, SpoolDirs: spoolDirs, SetOption: InjectOption, Log: log}),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("injector listening", "addr", ln.Addr().String(), "namespace", *ns, "image", o.Image)
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(stop)
	select {
	case err := <-done:
		return err
	case <-stop:
	}
	// In-flight reviews finish; the API server retries others on another replica.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(ctx)
	if e := <-done; !errors.Is(e, http.ErrServerClosed) {
		err = errors.Join(err, e)
	}
	log.Info("injector stopped")
	return err
}

// InjectOption sets hookpace inject's flag name (without --) to value in
// o, as the command line would: what the injector does with a Pod's
// hookpace.dev/NAME annotation.
func InjectOption(o *inject.Options, name, value string) error {
	fs := newFlags("annotation")
	var cidrs, services listFlag
	kept := *o
	injectFlags(fs, o, &cidrs, &services)
	*o = kept // registering a flag sets its default; o's values stand
	if fs.Lookup(name) == nil {
		return fmt.Errorf("hookpace inject has no flag --%s", name)
	}
	if err := fs.Set(name, value); err != nil {
		return err
	}
	o.CIDRs = append(append(o.CIDRs, cidrs...), services...)
	return nil
}
