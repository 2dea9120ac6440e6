package server

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"sync"
	"time"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/egress"
	"github.com/hookpace/hookpace/pacer"
	"github.com/hookpace/hookpace/proxy"
	"github.com/hookpace/hookpace/sign"
	"github.com/hookpace/hookpace/telemetry"
)

// policies turns a config into the dispatcher's per-host policy source.
//
// A policy depends only on the hosts entry a host matches (or the
// defaults), so the hosts that match one share its policy: tens of
// thousands of hosts on the defaults hold one between them.
func policies(cfg *config.Config, files *Files) func(string) *deliver.Policy {
	var mu sync.Mutex
	made := make(map[string]*deliver.Policy) // by hosts key; "" the defaults
	doors := doorSigners(cfg, files)
	return func(host string) *deliver.Policy {
		key, hc := cfg.Lookup(host)
		mu.Lock()
		defer mu.Unlock()
		if p := made[key]; p != nil {
			return p
		}
		p := Policy(hc, files.Signer(hc.Sign))
		p.Auth = files.Credentials(hc.Auth)
		p.Doors = doors
		p.IDHeader, p.AttemptHeader = cfg.Delivery.IDHeader, cfg.Delivery.AttemptHeader
		made[key] = &p
		return &p
	}
}

// proxyPolicy is the part of cfg (and of the files it names) the proxy
// reads.
func proxyPolicy(cfg *config.Config, files *Files) proxy.Policy {
	return proxy.Policy{
		Host: func(host string) proxy.HostPolicy {
			key, hc := cfg.Lookup(host)
			return proxy.HostPolicy{MaxQueued: hc.MaxQueued, Connect: proxyConnect(hc.Connect), Named: key != "",
				Webhooks: proxyWebhooks(hc.Webhooks), DedupeWindow: hc.DedupeWindow.D(),
				MaxAge: hc.MaxAge.D(), Rate: hc.Rate.PerSecond(), FairnessKey: proxyFairness(hc.Fairness.Key),
				PathDepth: hc.Fairness.PathDepth, MaxQueuedPerKey: hc.Fairness.MaxQueuedPerKey,
				Rewrite: hc.Rewrite.JSON, RewriteHeaders: hc.Rewrite.Headers}
		},
		IdempotencyHeader: cfg.Dedupe.IdempotencyHeader,
		CoalesceHeader:    cfg.Dedupe.CoalesceHeader,
		MaxBody:           int64(cfg.Spool.MaxBody),
		MaxHeader:         int64(cfg.Spool.MaxHeader),
		BodyTimeout:       cfg.Proxy.BodyTimeout.D(),
		Users:             proxyUsers(cfg.Auth.Users),
		Listen:            cfg.Listen,
		Methods:           cfg.Spool.Methods,
		Webhooks:          proxyWebhookRules(cfg.Webhooks),
		WebhookRulesSet:   cfg.WebhookRulesSet,
		HandoffSecret:     files.HandoffSecret,
		Apps:              inboundApps(cfg),
	}
}

// proxyConnect is the proxy's mode for a host's connect: setting.
func proxyConnect(s string) proxy.Connect {
	switch s {
	case config.ConnectMITM:
		return proxy.ConnectMITM
	case config.ConnectDeny:
		return proxy.ConnectDeny
	}
	return proxy.ConnectTunnel
}

// proxyWebhooks is the proxy's mode for a host's webhooks: setting.
func proxyWebhooks(s string) proxy.WebhooksMode {
	switch s {
	case config.WebhooksAll:
		return proxy.WebhooksAll
	case config.WebhooksNone:
		return proxy.WebhooksNone
	}
	return proxy.WebhooksRules
}

// proxyFairness is where the proxy takes a host's fairness keys from, by
// its fairness.key ("": none).
func proxyFairness(s string) proxy.FairnessFrom {
	switch s {
	case config.FairnessHeader:
		return proxy.FairnessHeader
	case config.FairnessProxyUser:
		return proxy.FairnessProxyUser
	case config.FairnessPath:
		return proxy.FairnessPath
	}
	return proxy.FairnessNone
}

func proxyUsers(us []config.User) []proxy.User {
	if len(us) == 0 {
		return nil
	}
	out := make([]proxy.User, len(us))
	for i, u := range us {
		out[i] = proxy.User{Username: u.Username, Password: u.Password}
	}
	return out
}

func proxyWebhookRules(ws []config.WebhookRule) []proxy.WebhookRule {
	if len(ws) == 0 {
		return nil
	}
	out := make([]proxy.WebhookRule, len(ws))
	for i, w := range ws {
		out[i] = proxy.WebhookRule{Name: w.Name, Host: w.Host, Methods: w.Methods, Path: w.Path, Header: w.Header}
	}
	return out
}

// Policy converts one host's config to its delivery policy, signed by
// signer (LoadFiles built it for hc.Sign; nil: not signed).
func Policy(hc config.HostConfig, signer *sign.Signer) deliver.Policy {
	hold := make([]time.Duration, len(hc.HoldSchedule))
	for i, d := range hc.HoldSchedule {
		hold[i] = d.D()
	}
	var batch *deliver.Batch
	if b := hc.Batch; b != nil {
		batch = &deliver.Batch{MaxEvents: b.MaxEvents, MaxBytes: int(b.MaxBytes), MaxWait: b.MaxWait.D(),
			Envelope: b.Format == config.BatchEnvelope, Headers: b.Headers}
	}
	return deliver.Policy{
		Signer:       signer,
		Rewrite:      hc.Rewrite.Headers,
		RewriteRules: hc.Rewrite.String(),
		Batch:        batch,
		Limits: pacer.Limits{
			Rate:            hc.Rate.PerSecond(),
			Burst:           hc.Burst,
			Concurrency:     hc.ConcurrencyCap(),
			AutoConcurrency: hc.AutoConcurrency,
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
		AutoPauseAfter:     hc.AutoPauseAfter.D(),
		BackoffInitial:     hc.BackoffInitial.D(),
		BackoffMax:         hc.BackoffMax.D(),
		Retry4xx:           hc.Retry4xx,
		UpgradeTLS:         hc.UpgradeTLS,
		InsecureSkipVerify: hc.InsecureSkipVerify,
		PartnerLimits:      hc.PartnerLimits != config.PartnerLimitsIgnore,
		PartnerLimitsTTL:   hc.PartnerLimitsTTL.D(),
		Weights:            hc.Fairness.Weights,
		MinShare:           hc.Priority.MinShare,
	}
}

// idlePerHost is the most idle connections kept to one host: the largest
// number of attempts cfg lets one host have in flight, since more can
// never be in use at once; at least config.DefaultMaxConcurrency, so that
// a reload that raises a host's concurrency still finds room.
func idlePerHost(cfg *config.Config) int {
	n := max(cfg.Defaults.ConcurrencyCap(), config.DefaultMaxConcurrency)
	for _, hc := range cfg.Hosts {
		n = max(n, hc.ConcurrencyCap())
	}
	return n
}

// idle is what a transport keeps for reuse: at most PerHost idle
// connections to one host and Total over all hosts (0: no total bound),
// each for Timeout after its last use. A total below the hosts in use
// evicts the least recently used host's connection on every delivery, so
// deliveries to thousands of hosts would each open a new connection (and
// TLS handshake); without one, what is kept is bounded by the hosts sent
// to within Timeout times PerHost.
type idle struct {
	PerHost, Total int
	Timeout        time.Duration
}

// deliveryIdle is the delivery clients' idle pool for cfg.
func deliveryIdle(cfg *config.Config) idle {
	return idle{PerHost: idlePerHost(cfg), Total: cfg.Delivery.MaxIdleConnections,
		Timeout: time.Duration(cfg.Delivery.IdleConnectionTimeout)}
}

// oneHostIdle is the idle pool of a transport that serves one host (an
// app, a token endpoint, one host's client certificate).
var oneHostIdle = idle{PerHost: config.DefaultMaxConcurrency, Timeout: time.Duration(config.DefaultIdleConnectionTimeout)}

// transport is an outbound transport that never reads proxy settings from
// the environment (hookpace's own HTTP_PROXY may point at itself), dials
// only what the egress guard allows, verifies TLS and keeps idle
// connections as keep says.
func transport(guard *egress.Swap, roots *x509.CertPool, insecure bool, keep idle) *http.Transport {
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           proxy.OwnDial(guard.DialContext), // a capture loop is seen (proxy/loop.go)
		TLSClientConfig:       &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12, InsecureSkipVerify: insecure},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          keep.Total,
		MaxIdleConnsPerHost:   keep.PerHost,
		IdleConnTimeout:       keep.Timeout,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
	}
	guard.Track(tr)
	return tr
}

// deliveryClient sends webhooks: no redirects are followed (a redirect is a
// permanent failure), the egress policy is asked before every attempt,
// requests are traced and measured, and a connection is kept idle only
// while the pool can hold it until its host's next delivery (keeper).
func deliveryClient(tel *telemetry.Telemetry, guard *egress.Swap, roots *x509.CertPool, insecure bool, keep idle) *http.Client {
	once := transport(guard, roots, insecure, keep)
	once.DisableKeepAlives = true
	return &http.Client{
		Transport: tel.WrapTransport(egress.Checked{Policy: guard,
			Next: newKeeper(transport(guard, roots, insecure, keep), once, keep.Total, keep.Timeout, nil)}),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
