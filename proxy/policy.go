package proxy

import (
	"time"

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
	Users       []User // proxy Basic auth; none = no auth
	Listen      string // the proxy's address as configured, for the origin-form hint
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
	Webhooks        []WebhookRule
	WebhookRulesSet bool
	// Apps are the inbound routes' apps: the proxy's doors refuse any
	// request to one (inbound.go).
	Apps []App
}

// HostPolicy is what the proxy needs to know about one destination host.
type HostPolicy struct {
	MaxQueued int64   // webhooks queued for the host before 429; 0 = no cap
	Connect   Connect // how a CONNECT, or captured TLS, to the host is handled
	// Named says a hosts entry matches the host (else it has defaults).
	Named bool
	// Webhooks is the host's webhooks mode: whether the rules decide
	// (WebhooksRules) or all or none of its requests are webhooks.
	Webhooks WebhooksMode
	// DedupeWindow is how long an idempotency key is remembered; 0: off.
	DedupeWindow time.Duration
	// MaxAge bounds Hookpace-Delay and Hookpace-Not-Before; 0: unbounded.
	MaxAge time.Duration
	// Rate is the host's configured rate per second, for the Retry-After
	// of a fairness key at MaxQueuedPerKey.
	Rate float64
	// FairnessKey is where a webhook's fairness key comes from;
	// FairnessNone: no fairness keys.
	FairnessKey FairnessFrom
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

// Connect is how the proxy handles a CONNECT, or captured TLS, to a host
// (a hosts entry's connect: setting).
type Connect uint8

const (
	ConnectTunnel Connect = iota // splice bytes through unchanged: not spooled, not paced
	ConnectMITM                  // terminate TLS with a CA in force that covers the name; else as ConnectTunnel
	ConnectDeny                  // refuse
)

// WebhooksMode is a host's webhooks mode (a hosts entry's webhooks:).
type WebhooksMode uint8

const (
	WebhooksRules WebhooksMode = iota // Policy.Webhooks, or the defaults without them, decide
	WebhooksAll                       // every request of Policy.Methods to the host is a webhook
	WebhooksNone                      // no request to the host is a webhook: all are forwarded
)

// FairnessFrom is where a webhook's fairness key comes from (a host's
// fairness.key).
type FairnessFrom uint8

const (
	FairnessNone      FairnessFrom = iota // no fairness keys
	FairnessHeader                        // the Hookpace-Fairness-Key request header
	FairnessProxyUser                     // the proxy auth user the request authenticated as
	FairnessPath                          // the URL path's first HostPolicy.PathDepth segments
)

// User is one proxy Basic auth credential.
type User struct {
	Username string
	Password string
}
