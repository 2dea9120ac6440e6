// Package catchup asks a webhook provider's API, every so often, for
// what it sent to an inbound route (or should have) and gets to the app
// what the route has not taken: GitHub's failed deliveries are
// redelivered, signed, through the route's door; Stripe's events are
// fetched and taken in without a signature, marked as fetched. The
// route's dedupe keeps what arrives twice from reaching the app twice.
package catchup

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/inbound"
)

// Door is the inbound route catch-up feeds; *inbound.Route is the real one.
type Door interface {
	// Seen reports whether the route has taken delivery id key.
	Seen(key string) bool
	// TakeFetched takes in an event fetched from the provider's API.
	TakeFetched(ctx context.Context, from, path string, body []byte) (inbound.Fetched, error)
}

// Options configure a Runner.
type Options struct {
	Route  string // the route's name, for logs and the state file
	Config config.CatchUp
	Door   Door
	// StateDir is where a provider's cursor is kept across restarts
	// (beside the spool); "": nowhere, each start begins from Since.
	StateDir string
	// Client calls the provider's API; default: a client of its own that
	// dials directly (no proxy from the environment) and verifies TLS.
	Client *http.Client
	Logger *slog.Logger
	Now    func() time.Time
	// After is the clock's timer: a channel that receives once d has
	// passed (time.After by default).
	After func(d time.Duration) <-chan time.Time
}

// Round is what one round did.
type Round struct {
	Listed      int // deliveries or events read from the API within the window
	Failed      int // GitHub: deliveries whose every attempt failed
	Seen        int // of those, or of the events, the route had already
	Redelivered int // GitHub: redeliveries requested
	GaveUp      int // GitHub: failed after MaxRedeliveries redeliveries
	Fetched     int // Stripe: events taken in
	Duplicates  int // Stripe: events fetched that the route had (under another body)
	Filtered    int // Stripe: events no target's filter takes
	Later       int // Stripe: events younger than Every, left for a later round
}

// provider is one round's work against one provider's API.
type provider interface {
	round(ctx context.Context, now time.Time) (Round, error)
}

// Runner runs a route's catch-up: a round at start, then one every Every.
type Runner struct {
	opts Options
	p    provider
}

// New returns the runner of o.Config.
func New(o Options) (*Runner, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.After == nil {
		o.After = time.After
	}
	if o.Client == nil {
		o.Client = NewClient()
	}
	r := &Runner{opts: o}
	switch o.Config.Provider {
	case config.CatchUpGitHub:
		r.p = &github{opts: &r.opts}
	case config.CatchUpStripe:
		r.p = &stripe{opts: &r.opts, state: stateFile(o.StateDir, o.Route)}
	default:
		return nil, fmt.Errorf("catch_up: unknown provider %q", o.Config.Provider)
	}
	return r, nil
}

// NewClient is an HTTP client for a provider's API: it dials the API
// directly, whatever proxy the environment names (hookpace may be that
// proxy), and verifies the API's certificate against the system roots.
func NewClient() *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS12},
			TLSHandshakeTimeout: 10 * time.Second,
			MaxIdleConnsPerHost: 2,
			IdleConnTimeout:     90 * time.Second,
			ForceAttemptHTTP2:   true,
		},
	}
}

// Run runs a round at once, then one every Every, until ctx ends. Each
// round writes one line: what it found and did, or why it failed; a
// failed round is tried again at the next.
func (r *Runner) Run(ctx context.Context) {
	for {
		r.Once(ctx)
		select {
		case <-ctx.Done():
			return
		case <-r.opts.After(r.opts.Config.Every.D()):
		}
	}
}

// Once runs one round and logs it.
func (r *Runner) Once(ctx context.Context) (Round, error) {
	start := r.opts.Now()
	res, err := r.p.round(ctx, start)
	attrs := []slog.Attr{slog.String("route", r.opts.Route), slog.String("provider", r.opts.Config.Provider),
		slog.Int("listed", res.Listed)}
	if r.opts.Config.Provider == config.CatchUpGitHub {
		attrs = append(attrs, slog.Int("failed", res.Failed), slog.Int("seen", res.Seen),
			slog.Int("redelivered", res.Redelivered), slog.Int("gave_up", res.GaveUp))
	} else {
		attrs = append(attrs, slog.Int("seen", res.Seen), slog.Int("fetched", res.Fetched),
			slog.Int("duplicates", res.Duplicates), slog.Int("filtered", res.Filtered), slog.Int("later", res.Later))
	}
	attrs = append(attrs, slog.Int64("duration_ms", r.opts.Now().Sub(start).Milliseconds()))
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelWarn
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	r.opts.Logger.LogAttrs(ctx, level, "catch_up", attrs...)
	return res, err
}

// apiError is a provider's refusal: its status and the message it gave,
// never the request's credentials.
type apiError struct {
	Status  int
	Code    string // Stripe's error code ("resource_missing")
	Message string
	Retry   string // Retry-After, or when a rate limit resets
}

func (e *apiError) Error() string {
	s := fmt.Sprintf("API answered %d", e.Status)
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Retry != "" {
		s += " (retry after " + e.Retry + ")"
	}
	return s
}

// readSecret reads a credential's file, read at each round so that a
// rotated file is used at once. The error names the file, never what it
// holds.
func readSecret(field, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("catch_up.%s: %w", field, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("catch_up.%s: %s is empty", field, path)
	}
	return s, nil
}

// drain reads what is left of a response's body (bounded), so that its
// connection is reused, and closes it.
func drain(b io.ReadCloser) {
	io.Copy(io.Discard, io.LimitReader(b, 64<<10))
	b.Close()
}
