package config

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Catch-up providers.
const (
	CatchUpGitHub = "github"
	CatchUpStripe = "stripe"
)

// How long each provider keeps what catch-up reads: GitHub a hook's
// deliveries for 3 days, Stripe events for 30.
const (
	GitHubKeeps = 3 * 24 * time.Hour
	StripeKeeps = 30 * 24 * time.Hour
)

// CatchUp is a route's `catch_up` block: every Every, hookpace asks the
// provider's API for what it sent (or should have) within Since, and
// gets to the app what the route has not seen. GitHub: failed deliveries
// of one hook (Repo or Org with HookID, or the App's hook) are
// redelivered, signed, through the door. Stripe: events are fetched and
// taken in without a signature, marked as fetched, at Path. Credentials
// are files, read at each round, never logged.
//
//	catch_up:
//	  provider: github
//	  repo: octo-org/octo-repo
//	  hook_id: 12345678
//	  token_file: /run/secrets/github-token
type CatchUp struct {
	Provider string
	Every    Duration
	Since    Duration // 0 until resolved: the provider's limit, within the app's dedupe_window
	APIURL   string   // without a trailing slash
	// GitHub: one of Repo ("owner/name") or Org with HookID and
	// TokenFile, or AppID with PrivateKeyFile (the App's own hook).
	Repo           string
	Org            string
	HookID         int64
	TokenFile      string
	AppID          int64
	PrivateKeyFile string
	// Stripe: the secret key's file, the event types (none: all) and the
	// webhook path events are taken in at.
	APIKeyFile string
	Types      []string
	Path       string
	Line       int
}

type rawCatchUp struct {
	Provider       opt[string]        `yaml:"provider"`
	Every          opt[Duration]      `yaml:"every"`
	Since          opt[Duration]      `yaml:"since"`
	APIURL         opt[string]        `yaml:"api_url"`
	Repo           opt[string]        `yaml:"repo"`
	Org            opt[string]        `yaml:"org"`
	HookID         opt[int64]         `yaml:"hook_id"`
	TokenFile      opt[string]        `yaml:"token_file"`
	AppID          opt[int64]         `yaml:"app_id"`
	PrivateKeyFile opt[string]        `yaml:"private_key_file"`
	APIKeyFile     opt[string]        `yaml:"api_key_file"`
	Types          opt[[]opt[string]] `yaml:"types"`
	Path           opt[string]        `yaml:"path"`
}

var catchUpFields = map[string]bool{"provider": true, "every": true, "since": true, "api_url": true, "repo": true,
	"org": true, "hook_id": true, "token_file": true, "app_id": true, "private_key_file": true, "api_key_file": true,
	"types": true, "path": true}

// resolveCatchUp resolves rt's catch_up block at n (path is
// "inbound[i].catch_up"); c's hosts give the app's dedupe_window, which
// Since must stay within: a delivery id older than the window is no
// longer known, and what catch-up brings back would reach the app again.
func resolveCatchUp(p *problems, path string, n *yaml.Node, rt *InboundRoute, c *Config) *CatchUp {
	var r rawCatchUp
	if !decodeBlock(p, path, n, catchUpFields, "provider, every, since, ...", &r) {
		return nil
	}
	f := func(name string) string { return path + "." + name }
	cu := &CatchUp{Every: Duration(5 * time.Minute), Line: n.Line}
	if !field(p, f("provider"), r.Provider, &cu.Provider, oneOf(CatchUpGitHub, CatchUpStripe)) {
		if !r.Provider.Set && r.Provider.Err == nil {
			p.add(n.Line, f("provider"), "required: github or stripe")
		}
		return nil
	}
	field(p, f("every"), r.Every, &cu.Every, atLeastDuration(time.Second))
	keeps, api, name := GitHubKeeps, "https://api.github.com", "GitHub keeps a hook's deliveries"
	if cu.Provider == CatchUpStripe {
		keeps, api, name = StripeKeeps, "https://api.stripe.com", "Stripe keeps events"
	}
	field(p, f("since"), r.Since, &cu.Since, func(d Duration) error {
		if d <= 0 || d.D() > keeps {
			return fmt.Errorf("want a positive duration up to %s (%s for %d days), got %s", Duration(keeps), name, keeps/(24*time.Hour), d)
		}
		return nil
	})
	cu.APIURL = api
	field(p, f("api_url"), r.APIURL, &cu.APIURL, checkAppURL)
	cu.APIURL = strings.TrimSuffix(cu.APIURL, "/")
	if cu.Provider == CatchUpGitHub {
		resolveCatchUpGitHub(p, path, n, &r, cu, rt)
	} else {
		resolveCatchUpStripe(p, path, n, &r, cu, rt)
	}
	_, hc := c.Lookup(rt.Host)
	window := hc.DedupeWindow
	switch {
	case window <= 0:
		p.add(n.Line, path, "the app's host %s has dedupe_window 0 (off): catch-up needs the route's dedupe to know what the app has", rt.Host)
	case r.Since.Set && cu.Since > window:
		p.add(r.Since.Line, f("since"), "%s is longer than the dedupe_window of the app's host %s (%s): what catch-up brings back from before the window would reach the app again; raise dedupe_window or lower since", cu.Since, rt.Host, window)
	case !r.Since.Set:
		cu.Since = min(Duration(keeps), window)
	}
	return cu
}

func resolveCatchUpGitHub(p *problems, path string, n *yaml.Node, r *rawCatchUp, cu *CatchUp, rt *InboundRoute) {
	f := func(name string) string { return path + "." + name }
	for name, o := range map[string]opt[string]{"api_key_file": r.APIKeyFile, "path": r.Path} {
		if o.Set {
			p.add(o.Line, f(name), "only for provider stripe (a redelivery arrives at the path GitHub posts to)")
		}
	}
	if r.Types.Set {
		p.add(r.Types.Line, f("types"), "only for provider stripe")
	}
	field(p, f("repo"), r.Repo, &cu.Repo, checkRepo)
	field(p, f("org"), r.Org, &cu.Org, nonEmpty)
	field(p, f("hook_id"), r.HookID, &cu.HookID, atLeast[int64](1))
	field(p, f("token_file"), r.TokenFile, &cu.TokenFile, nonEmpty)
	field(p, f("app_id"), r.AppID, &cu.AppID, atLeast[int64](1))
	field(p, f("private_key_file"), r.PrivateKeyFile, &cu.PrivateKeyFile, nonEmpty)
	hook, app := r.Repo.Set || r.Org.Set, r.AppID.Set || r.PrivateKeyFile.Set
	switch {
	case hook == app:
		p.add(n.Line, path, "want one hook: repo or org with hook_id and token_file (a repository's or organisation's webhook), or app_id with private_key_file (a GitHub App's webhook)")
	case hook:
		if r.Repo.Set && r.Org.Set {
			p.add(r.Org.Line, f("org"), "set one of repo and org")
		}
		if !r.HookID.Set && r.HookID.Err == nil {
			p.add(n.Line, f("hook_id"), "required with repo or org: the webhook's id (Settings → Webhooks, the number in its URL)")
		}
		if !r.TokenFile.Set && r.TokenFile.Err == nil {
			p.add(n.Line, f("token_file"), "required with repo or org: a file holding a token that may read and redeliver the hook's deliveries")
		}
	default:
		if !r.AppID.Set && r.AppID.Err == nil {
			p.add(n.Line, f("app_id"), "required with private_key_file: the App's id")
		}
		if !r.PrivateKeyFile.Set && r.PrivateKeyFile.Err == nil {
			p.add(n.Line, f("private_key_file"), "required with app_id: the App's private key (PEM)")
		}
		if r.HookID.Set {
			p.add(r.HookID.Line, f("hook_id"), "not with app_id: an App has one webhook")
		}
		if r.TokenFile.Set {
			p.add(r.TokenFile.Line, f("token_file"), "not with app_id: an App authenticates with a JWT from private_key_file")
		}
	}
	if !strings.EqualFold(rt.Dedupe.Header, "X-GitHub-Delivery") {
		p.add(n.Line, path, "catch-up from GitHub needs the route's dedupe: {header: X-GitHub-Delivery}: a redelivery keeps that id, and the route knows by it what it has")
	}
}

func resolveCatchUpStripe(p *problems, path string, n *yaml.Node, r *rawCatchUp, cu *CatchUp, rt *InboundRoute) {
	f := func(name string) string { return path + "." + name }
	for name, o := range map[string]opt[string]{"repo": r.Repo, "org": r.Org, "token_file": r.TokenFile, "private_key_file": r.PrivateKeyFile} {
		if o.Set {
			p.add(o.Line, f(name), "only for provider github")
		}
	}
	for name, o := range map[string]opt[int64]{"hook_id": r.HookID, "app_id": r.AppID} {
		if o.Set {
			p.add(o.Line, f(name), "only for provider github")
		}
	}
	if !field(p, f("api_key_file"), r.APIKeyFile, &cu.APIKeyFile, nonEmpty) && !r.APIKeyFile.Set && r.APIKeyFile.Err == nil {
		p.add(n.Line, f("api_key_file"), "required: a file holding a Stripe secret or restricted key that may read events")
	}
	list(p, f("types"), r.Types, &cu.Types, nonEmpty, true)
	if len(cu.Types) > 20 {
		p.add(r.Types.Line, f("types"), "Stripe takes at most 20 event types, got %d", len(cu.Types))
	}
	switch {
	case field(p, f("path"), r.Path, &cu.Path, checkPlainPath):
	case r.Path.Set || r.Path.Err != nil:
	case len(rt.Paths) == 1 && !strings.ContainsAny(rt.Paths[0], "*?[\\"):
		cu.Path = rt.Paths[0]
	default:
		p.add(n.Line, f("path"), "required: the path Stripe posts this route's events to (e.g. /webhooks/stripe); fetched events are taken in there")
	}
	if rt.Dedupe.JSON != "id" {
		p.add(n.Line, path, "catch-up from Stripe needs the route's dedupe: {json: id}: an event's id is how the route knows what it has")
	}
}

// checkRepo accepts "owner/name".
func checkRepo(s string) error {
	owner, name, ok := strings.Cut(s, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("want owner/name, got %q", s)
	}
	return nil
}

// checkPlainPath accepts a request path without glob characters.
func checkPlainPath(s string) error {
	if !strings.HasPrefix(s, "/") || strings.ContainsAny(s, "*?[\\ ") {
		return fmt.Errorf("want a plain path starting with / (no glob), got %q", s)
	}
	if _, err := http.NewRequest(http.MethodPost, "http://x"+s, nil); err != nil {
		return fmt.Errorf("not a path: %v", err)
	}
	return nil
}

func atLeastDuration(lo time.Duration) func(Duration) error {
	return func(d Duration) error {
		if d.D() < lo {
			return fmt.Errorf("must be at least %s, got %s", Duration(lo), d)
		}
		return nil
	}
}
