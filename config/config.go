// Package config loads and validates hookpace's YAML configuration.
//
// Loading starts from the built-in defaults (Default), overlays the file,
// rejects unknown fields and reports every problem it finds, each naming the
// file, the line and the field:
//
//	config.yaml:12: hosts["api.partner.example"].rate: malformed rate "2/x": want N/s, N/m or N/h
//
// A Config is immutable once returned; a reload produces a new one, and
// RestartRequired says which differences cannot be applied live.
package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Config is the resolved, validated configuration.
type Config struct {
	Listen string // proxy listener, host:port
	Admin  string // admin/metrics listener, host:port
	// AdminAccess says who may use the admin API (admin.hosts,
	// admin.token_file, admin.insecure_no_auth).
	AdminAccess AdminConfig
	Log         LogConfig
	Spool       SpoolConfig
	Defaults    HostConfig            // fully resolved settings for hosts without their own entry
	Hosts       map[string]HostConfig // by lower-cased key as written; each fully resolved over Defaults
	MITM        MITMConfig
	// Webhooks are the rules that tell webhooks from API calls;
	// WebhookRulesSet says the config has a webhooks block (else the
	// default rules hold: see proxy's classify).
	Webhooks        []WebhookRule
	WebhookRulesSet bool
	TLS             TLSConfig
	Egress          EgressConfig
	Auth            AuthConfig
	Telemetry       TelemetryConfig
	Shutdown        ShutdownConfig
	Fleet           FleetConfig    // see fleet.go
	Delivery        DeliveryConfig // see delivery.go
	Dedupe          DedupeConfig   // see dedupe.go
	Journal         JournalConfig  // see journal.go
	Proxy           ProxyConfig    // see proxy.go
	Events          EventsConfig   // see events.go
	Memory          MemoryConfig   // see memory.go
	Inbound         []InboundRoute // see inbound.go
	Capture         CaptureConfig  // see capture.go
	Path            string         // file it was loaded from (the name given to Parse); "" for Default()

	hosts *hostIndex     // precomputed for Lookup
	lines map[string]int // line of each field set in the file, hosts entries aside (see FieldError)
}

// LogConfig selects the log format ("text" or "json") and minimum level
// ("debug", "info", "warn" or "error").
type LogConfig struct {
	Format string
	Level  string
}

// SpoolConfig sizes the durable spool.
type SpoolConfig struct {
	Dir         string          // Badger directory
	MaxMessages int64           // total spooled messages before intake is refused
	MaxBytes    ByteSize        // total spooled bytes before intake is refused
	HighWater   float64         // fraction of a limit at which intake starts being refused, in (0,1]
	LowWater    float64         // fraction below which intake resumes, in [0,HighWater)
	MaxBody     ByteSize        // largest accepted request body, in (0, MaxBody]
	MaxHeader   ByteSize        // largest accepted request header block, in [1KiB, 1MiB]
	MinFree     ByteSize        // free disk space below which new webhooks get 503; at least spool.MinFreeFloor()
	Methods     []string        // request methods spooled (upper case); the others pass through
	Replicate   ReplicateConfig // a copy of the queue off this node (replicate.go)
}

// HostConfig is the pacing and delivery policy for one destination.
type HostConfig struct {
	Rate               Rate       // steady request rate per destination host
	Burst              int        // token bucket size, >= 1
	Concurrency        int        // in-flight deliveries per destination host, >= 1
	AutoConcurrency    bool       // concurrency: auto, found from latency and errors (concurrency.go)
	MaxConcurrency     int        // the ceiling of concurrency: auto, >= 1
	Timeout            Duration   // per attempt
	MaxQueued          int64      // 0 = no per-host cap
	DedupeWindow       Duration   // how long an Idempotency-Key is remembered; 0 = dedupe off
	MaxAttempts        int        // attempts before dead-lettering, >= 1
	MaxAge             Duration   // age at which an undelivered message is dead-lettered
	AutoPauseAfter     Duration   // pause a host failing without a success this long; 0 = off
	BackoffInitial     Duration   // first retry delay after a failure
	BackoffMax         Duration   // cap on the retry delay, >= BackoffInitial
	HoldSchedule       []Duration // holds after consecutive 429s without Retry-After; the last repeats
	MaxRetryAfter      Duration   // cap applied to Retry-After values
	Adaptive           bool       // AIMD: cut the rate on 429, grow it back on success
	MinRate            Rate       // floor for the adaptive rate, <= Rate
	BreakerFailures    int        // consecutive failures that open the circuit breaker
	BreakerCooldown    Duration   // open -> half-open after this long
	Retry4xx           []int      // 4xx statuses retried instead of dead-lettered (429 is always a hold)
	UpgradeTLS         bool       // deliver http:// webhooks over https://
	Connect            string     // CONNECT handling: "mitm", "tunnel" or "deny"
	Webhooks           string     // which requests are webhooks: WebhooksRules (""), WebhooksAll or WebhooksNone
	InsecureSkipVerify bool       // skip upstream certificate verification for this host
	PartnerLimits      string     // "obey" or "ignore" the partner's RateLimit / X-RateLimit-* headers
	PartnerLimitsTTL   Duration   // a learned limit expires after this long without the header
	Sign               *Signing   // how each attempt is signed (see sign.go); nil = not signed
	Batch              *Batching  // how webhooks are batched (see batch.go); nil = one per request
	Auth               *Auth      // credentials attached to each attempt (see auth.go); nil = none
	Fairness           Fairness   // fairness keys within the host (see fairness.go)
	Priority           Priority   // the share lower priorities keep (see fairness.go)
	Rewrite            Rewrite    // what of headers and JSON bodies leaves (see rewrite.go)
}

// Partner limits modes.
const (
	PartnerLimitsObey   = "obey"   // hold on an exhausted quota, cap the rate at a stated policy
	PartnerLimitsIgnore = "ignore" // pace by the config and 429s alone
)

// Connect modes.
const (
	ConnectMITM   = "mitm"   // terminate TLS with hookpace's (or the operator's) CA, spool and pace the requests
	ConnectTunnel = "tunnel" // splice bytes through unchanged: not spooled, not throttled
	ConnectDeny   = "deny"   // refuse CONNECT
)

// MITMConfig is the CA that intercepts CONNECT: the operator's (CACert,
// CAKey), or else hookpace's own, created in the spool directory when a
// host is to be intercepted and constrained to Hosts.
type MITMConfig struct {
	CACert    string // PEM file
	CAKey     string // PEM file
	CacheSize int    // minted leaf certificates kept in memory
	// Hosts are the names hookpace's own CA may vouch for (names, "*."
	// suffixes, IPs, CIDRs); nil: the hosts entries whose connect is mitm.
	Hosts []string
	// PublicDir is where the public trust files go (CA certificate,
	// bundle, trust store); "" means TrustDir's default.
	PublicDir string
	// Scope is what hookpace's own CA vouches for: ScopeOpen (any DNS
	// name outside Exclude and the cluster's names, no IP address) or
	// ScopeListed (exactly Hosts, or the hosts entries whose connect is
	// mitm). Resolved: never "".
	Scope string
	// Exclude are DNS names an open-world CA never vouches for, beyond
	// mitm.DefaultExclude.
	Exclude []string
}

// Scopes of hookpace's own CA.
const (
	ScopeOpen   = "open"   // any partner DNS name, minted on demand; never an IP or a cluster name
	ScopeListed = "listed" // only the names the config lists; re-issued when they grow
)

// MITMOpen reports whether hookpace's own open-world CA intercepts
// CONNECT: no operator CA, and mitm.scope open.
func (c *Config) MITMOpen() bool { return !c.MITM.Enabled() && c.MITM.Scope == ScopeOpen }

// Enabled reports whether the operator's own CA is configured.
func (m MITMConfig) Enabled() bool { return m.CACert != "" }

// OwnCADir is where hookpace keeps its own CA: beside the spool, so that
// it lives exactly as long as the spool does.
func (c *Config) OwnCADir() string { return filepath.Join(c.Spool.Dir, "mitm") }

// SignKeyPath is where hookpace keeps its own Ed25519 signing key (sign
// scheme standard-webhooks-v1a without key_file): beside the spool, as
// its own CA is.
func (c *Config) SignKeyPath() string { return filepath.Join(c.Spool.Dir, "sign", "ed25519.pem") }

// TrustDir is where the public trust files are written: mitm.public_dir,
// else the spool directory's trust/, which a container can mount alone.
func (c *Config) TrustDir() string {
	if c.MITM.PublicDir != "" {
		return c.MITM.PublicDir
	}
	return filepath.Join(c.Spool.Dir, "trust")
}

// MITMNames are the names hookpace's own CA must vouch for: mitm.hosts if
// set, else every hosts key whose connect is mitm, sorted.
func (c *Config) MITMNames() []string {
	if c.MITM.Hosts != nil {
		return c.MITM.Hosts
	}
	var names []string
	for k, h := range c.Hosts {
		if h.Connect == ConnectMITM {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	return names
}

// TLSConfig adjusts upstream TLS verification.
type TLSConfig struct {
	CAFile string // extra PEM roots trusted for upstream verification
}

// EgressConfig lists destinations by CIDR or host name. Entries are
// lower-cased; CIDR syntax is checked.
type EgressConfig struct {
	Allow []string
	Deny  []string
}

// AuthConfig holds proxy Basic auth users.
type AuthConfig struct {
	Users []User
}

// Enabled reports whether any users are configured.
func (a AuthConfig) Enabled() bool { return len(a.Users) > 0 }

// User is one proxy Basic auth credential.
type User struct {
	Username string
	Password string
}

// DefaultMaxHostLabels is telemetry.max_host_labels's default: a scrape
// of /metrics costs about 28 lines a host label, and 2,000 keep it under
// a second on two cores (telemetry.DefaultMaxHostLabels; config does not
// import telemetry).
const DefaultMaxHostLabels = 2000

// TelemetryConfig configures metrics and traces.
type TelemetryConfig struct {
	MaxHostLabels       int    // distinct host label values before folding into "other"
	MetricsOTLPEndpoint string // "" = no OTLP metrics push
	Traces              TracesConfig
}

// TracesConfig selects a trace exporter.
type TracesConfig struct {
	Exporter    string  // "none", "otlp" or "stdout"
	Endpoint    string  // required for "otlp"
	SampleRatio float64 // in [0,1]
}

// Default returns the built-in configuration: valid and fully resolved.
func Default() *Config {
	c := &Config{
		Listen: "127.0.0.1:8080",
		Admin:  "127.0.0.1:9090",
		Log:    LogConfig{Format: "text", Level: "info"},
		Spool: SpoolConfig{
			Dir:         "./data",
			MaxMessages: 1_000_000,
			MaxBytes:    1 << 30,
			HighWater:   0.8,
			LowWater:    0.5,
			MaxBody:     1 << 20,
			MaxHeader:   64 << 10,
			Methods:     []string{"POST"},
			MinFree:     128 << 20,
			Replicate:   defaultReplicate(),
		},
		Defaults:  defaultHost(),
		Hosts:     map[string]HostConfig{},
		MITM:      MITMConfig{CacheSize: 1000, Scope: ScopeListed},
		Telemetry: TelemetryConfig{MaxHostLabels: DefaultMaxHostLabels, Traces: TracesConfig{Exporter: "none", SampleRatio: 1}},
		Shutdown:  ShutdownConfig{Timeout: Duration(30 * time.Second), Drain: Duration(30*time.Second - DrainRoom)},
		Fleet:     defaultFleet(),
		Delivery:  defaultDelivery(),
		Dedupe:    defaultDedupe(),
		Journal:   defaultJournal(),
		Proxy:     defaultProxy(),
		Events:    defaultEvents(),
		Memory:    MemoryConfig{Target: DefaultMemoryTarget},
	}
	c.hosts = newHostIndex(c.Hosts)
	return c
}

func defaultHost() HostConfig {
	d := func(v time.Duration) Duration { return Duration(v) }
	return HostConfig{
		Rate:           Rate{Count: 10, Per: time.Second},
		Burst:          20,
		Concurrency:    4,
		MaxConcurrency: DefaultMaxConcurrency,
		Timeout:        d(10 * time.Second),
		MaxAttempts:    12,
		DedupeWindow:   d(24 * time.Hour),
		MaxAge:         d(72 * time.Hour),
		BackoffInitial: d(time.Second),
		BackoffMax:     d(5 * time.Minute),
		HoldSchedule: []Duration{
			d(2 * time.Second), d(5 * time.Second), d(15 * time.Second), d(30 * time.Second), d(60 * time.Second),
		},
		MaxRetryAfter:    d(5 * time.Minute),
		Adaptive:         true,
		MinRate:          Rate{Count: 1, Per: time.Second},
		BreakerFailures:  5,
		BreakerCooldown:  d(30 * time.Second),
		Retry4xx:         []int{408, 425},
		Connect:          ConnectTunnel,
		PartnerLimits:    PartnerLimitsObey,
		PartnerLimitsTTL: d(10 * time.Minute),
		Fairness:         defaultFairness(),
		Priority:         defaultPriority(),
	}
}

// Load reads, parses and validates the file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	return Parse(path, data)
}

// Parse parses and validates data as a config file. name is used in error
// messages and stored in Config.Path. The error, if any, joins one
// *FieldError per problem found (see errors.Join).
func Parse(name string, data []byte) (*Config, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d (%s) a config file may have: is it the right file?",
			name, len(data), MaxFileSize, "1 MiB")
	}
	p := &problems{file: name}
	raw, doc := decode(data, p)
	if raw == nil {
		return nil, p.err()
	}
	c := resolve(raw, doc, p)
	if err := p.err(); err != nil {
		return nil, err
	}
	c.Path = name
	return c, nil
}

// MaxFileSize bounds a config file: checking one takes about 90 times its
// size in memory, and 1 MiB holds some 10,000 hosts entries of a line each.
const MaxFileSize = 1 << 20

// InFile reports whether the file named field ("auth", "egress.allow"),
// even as empty (`auth: {users: []}`), rather than leaving it to its
// default.
func (c *Config) InFile(field string) bool {
	_, ok := c.lines[field]
	return ok
}

// FieldError is a problem found with field after loading, such as a file
// the field names that can't be used, as a *FieldError naming the file and
// the field's line (0 when the field is not in the file).
func (c *Config) FieldError(field string, err error) error {
	return &FieldError{File: c.Path, Line: c.lines[field], Field: field, Msg: err.Error()}
}

// Lookup returns the host key and resolved settings for a lower-cased
// "host" or "host:port" (port only when not the scheme default).
//
// Matching order: exact "host:port", exact "host", then wildcard keys
// "*.suffix" with the longest suffix winning ("*.slack.example" matches
// "a.slack.example" and "a.b.slack.example" but not "slack.example"); at
// the same suffix a wildcard key with the request's port beats one without.
// With no match it returns ("", c.Defaults).
func (c *Config) Lookup(hostport string) (key string, hc HostConfig) {
	idx := c.hosts
	if idx == nil { // a Config not built by this package
		idx = newHostIndex(c.Hosts)
	}
	if key, ok := idx.match(hostport); ok {
		return key, c.Hosts[key]
	}
	return "", c.Defaults
}

// RestartRequired lists the fields that differ between old and new and
// cannot be applied to a running process, such as "listen", "tls.ca_file"
// or any fleet setting (fleet.redis, ...). A reload applies everything
// else: log.level, spool limits and watermarks, spool.max_body, defaults,
// hosts, egress, auth and shutdown.
func RestartRequired(old, new *Config) []string {
	if old == nil || new == nil {
		return nil
	}
	var changed []string
	for _, f := range []struct {
		name   string
		differ bool
	}{
		{"listen", old.Listen != new.Listen},
		{"admin", old.Admin != new.Admin},
		{"capture.listen", old.Capture.Listen != new.Capture.Listen},
		{"proxy.max_connections", old.Proxy.MaxConnections != new.Proxy.MaxConnections},
		{"spool.max_header_bytes", old.Spool.MaxHeader != new.Spool.MaxHeader},
		{"admin.hosts", !slices.Equal(old.AdminAccess.Hosts, new.AdminAccess.Hosts)},
		{"admin.token_file", old.AdminAccess.TokenFile != new.AdminAccess.TokenFile},
		{"admin.insecure_no_auth", old.AdminAccess.InsecureNoAuth != new.AdminAccess.InsecureNoAuth},
		{"log.format", old.Log.Format != new.Log.Format},
		{"spool.dir", filepath.Clean(old.Spool.Dir) != filepath.Clean(new.Spool.Dir)},
		{"spool.min_free", old.Spool.MinFree != new.Spool.MinFree},
		{"spool.replicate", replicateRestart(old.Spool.Replicate, new.Spool.Replicate)},
		{"dedupe.max_keys", old.Dedupe.MaxKeys != new.Dedupe.MaxKeys},
		{"dedupe.max_bytes", old.Dedupe.MaxBytes != new.Dedupe.MaxBytes},
		{"journal", journalRestart(old.Journal, new.Journal)},
		{"mitm.ca_cert", old.MITM.CACert != new.MITM.CACert},
		{"mitm.ca_key", old.MITM.CAKey != new.MITM.CAKey},
		{"mitm.cache_size", old.MITM.CacheSize != new.MITM.CacheSize},
		{"mitm.public_dir", old.MITM.PublicDir != new.MITM.PublicDir},
		{"tls.ca_file", old.TLS.CAFile != new.TLS.CAFile},
		{"telemetry.max_host_labels", old.Telemetry.MaxHostLabels != new.Telemetry.MaxHostLabels},
		{"delivery.max_in_flight", old.Delivery.MaxInFlight != new.Delivery.MaxInFlight},
		{"delivery.max_idle_connections", old.Delivery.MaxIdleConnections != new.Delivery.MaxIdleConnections},
		{"delivery.idle_connection_timeout", old.Delivery.IdleConnectionTimeout != new.Delivery.IdleConnectionTimeout},
		{"telemetry.metrics_otlp_endpoint", old.Telemetry.MetricsOTLPEndpoint != new.Telemetry.MetricsOTLPEndpoint},
		{"telemetry.traces", old.Telemetry.Traces != new.Telemetry.Traces},
	} {
		if f.differ {
			changed = append(changed, f.name)
		}
	}
	changed = append(changed, eventsRestart(old.Events, new.Events)...)
	changed = append(changed, inboundRestart(old.Inbound, new.Inbound)...)
	return append(changed, fleetRestart(old.Fleet, new.Fleet)...)
}
