package proxy

import (
	"time"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/rewrite"
)

// Policy is what the proxy needs to know of the config, and no more: the
// server builds it from each config it loads (see server.proxyPolicy), as
// it builds deliver.Policy for the dispatcher.
type Policy struct {
	// Host returns the settings for a destination host key (HostKey).
	Host    func(host string) HostPolicy
	MaxBody int64 // largest accepted body, spool.max_body
	// MaxHeader is the largest accepted header block,
	// spool.max_header_bytes; 0 = no limit here.
	MaxHeader int64
	// BodyTimeout is how long a request's body may take to arrive, from
	// the end of its headers (proxy.body_timeout); 0 = no limit here.
	BodyTimeout time.Duration
	Users       []config.User // proxy Basic auth; none = no auth
	Listen      string        // the proxy's address as configured, for the origin-form hint
	// Methods are the request methods spooled (spool.methods, upper
	// case); the others pass through. None: POST only.
	Methods []string
	// IdempotencyHeader names the header of idempotent enqueue
	// (dedupe.idempotency_header); "": off.
	IdempotencyHeader string
	// HandoffSecret checks hand-offs' signatures
	// (shutdown.handoff_secret_file); nil: hand-off claims are ignored.
	HandoffSecret []byte
	// CoalesceHeader names the header of coalescing
	// (dedupe.coalesce_header), stripped before delivery; "": off.
	CoalesceHeader string
	// Webhooks are the rules that tell webhooks from API calls, when
	// WebhookRulesSet (the config has a webhooks block); see classify.
	Webhooks        []config.WebhookRule
	WebhookRulesSet bool
	// Apps are the inbound routes' apps: the proxy's doors refuse any
	// request to one (inbound.go).
	Apps []App
}

// HostPolicy is what the proxy needs to know about one destination host.
type HostPolicy struct {
	MaxQueued int64  // webhooks queued for the host before 429; 0 = no cap
	Connect   string // CONNECT handling: config.ConnectMITM, ConnectTunnel or ConnectDeny
	// Named says a hosts entry matches the host (else it has defaults).
	Named bool
	// Webhooks is the host's webhooks mode: config.WebhooksAll,
	// WebhooksNone, or "" / WebhooksRules (the rules decide).
	Webhooks string
	// DedupeWindow is how long an idempotency key is remembered; 0: off.
	DedupeWindow time.Duration
	// MaxAge bounds Hookpace-Delay and Hookpace-Not-Before; 0: unbounded.
	MaxAge time.Duration
	// Rate is the host's configured rate per second, for the Retry-After
	// of a fairness key at MaxQueuedPerKey.
	Rate float64
	// FairnessKey is where a webhook's fairness key comes from
	// (config.FairnessHeader, FairnessProxyUser, FairnessPath); "": none.
	FairnessKey string
	PathDepth   int // fairness.path_depth, for FairnessPath
	// MaxQueuedPerKey is the webhooks queued for one fairness key before
	// 429 to that key's producer; 0 = no cap.
	MaxQueuedPerKey int64
	// Rewrite drops and masks JSON fields of the body before it is
	// stored (rewrite.go); nil: the body is stored as it came.
	Rewrite *rewrite.JSON
	// RewriteHeaders's Remove list is applied before the webhook is
	// stored (rewrite.go), and again by delivery; its Set only there.
	RewriteHeaders *rewrite.Headers
}
