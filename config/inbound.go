package config

import (
	"fmt"
	"net/http"
	"net/url"
	"path"
	"reflect"
	"strings"
	"time"

	"github.com/hookpace/hookpace/sign"
	"gopkg.in/yaml.v3"
)

// InboundRoute is one entry of `inbound`: a listener in front of the
// app's own webhook endpoint. A provider's POST to one of Paths is
// verified, spooled as a webhook to To+path and answered once durable;
// everything else on the listener is passed to the app synchronously.
// The app is a destination like any other: its hosts entry (Host) paces it.
// Paths match the path as the app routes it (package webpath) and every
// path below; on them every method but GET, HEAD and OPTIONS is the
// door's to check.
//
//	inbound:
//	  - listen: 0.0.0.0:8081
//	    to: http://127.0.0.1:3000
//	    paths: ["/webhooks/*"]
//	    verify: {scheme: stripe, secret_file: /run/secrets/stripe-whsec}
//	    dedupe: {json: id}
type InboundRoute struct {
	Name     string // the route's label in logs and metrics: `name`, else "inbound[i]"
	Listen   string
	CertFile string // TLS, with KeyFile; "" = plain HTTP
	KeyFile  string
	To       string // the app's base URL, without a trailing slash: the first target's
	Host     string // To's queue key (the app's hosts entry)
	// Targets are where each webhook goes, each its own delivery: one
	// (To, unnamed) unless `to` is a list. Passthrough and sync requests
	// go to the first, To.
	Targets []InboundTarget
	Paths   []string // path.Match globs of webhook paths, each with what is below it; nil = every path
	// Passthrough are globs of paths among Paths that go to the app
	// unverified, whatever the method (a provider's test endpoint).
	Passthrough []string
	Answer      InboundAnswer
	Verify      *InboundVerify // nil = not verified
	Dedupe      InboundDedupe
	Sync        []SyncRule
	// Sign is hookpace's own signature on what this route's door took in
	// (under InboundSignPrefix); nil: those deliveries are not signed.
	Sign *Signing
	// CatchUp asks the provider's API for what never arrived; nil: off.
	CatchUp *CatchUp
	Line    int
}

// InboundAnswer is what the door answers a webhook once it is durable.
// Zero Status: 202 with hookpace's usual JSON.
type InboundAnswer struct {
	Status int
	Body   string
}

// Verification schemes of inbound routes.
const (
	VerifyStandardWebhooks = "standard-webhooks"
	VerifyStripe           = "stripe"
	VerifyGitHub           = "github"
	VerifyShopify          = "shopify"
	VerifySlack            = "slack"
	VerifyHMAC             = "hmac"
)

// InboundVerify is how a route checks the provider's signature before
// it acknowledges anything. The secret is read by server.LoadFiles.
type InboundVerify struct {
	Scheme    string
	Secret    Secret
	Tolerance Duration // how old a signed timestamp may be (schemes that sign one)
	// hmac only: the header, algorithm (sha256, sha1, sha512), encoding
	// (hex, base64) and a prefix before the digest ("sha256=").
	Header    string
	Algorithm string
	Encoding  string
	Prefix    string
	Field     string
	Line      int
}

// InboundDedupe names where the provider's delivery id is: a header or a
// top-level JSON field of the body. Both empty: no dedupe.
type InboundDedupe struct {
	Header string
	JSON   string
}

// SyncRule picks webhook-path POSTs that the app must answer itself
// (handshakes): every condition set must hold.
type SyncRule struct {
	Path   string // a path.Match glob
	Method string
	JSON   string // a top-level JSON field of the body...
	Value  string // ...whose string value is this
}

// InboundSignPrefix is put before the Standard Webhooks headers of
// hookpace's own signature to the app (Hookpace-Webhook-Id and so on), so
// that they never collide with a provider's own webhook-* headers.
const InboundSignPrefix = "Hookpace-"

type rawInbound struct {
	Name     opt[string]        `yaml:"name"`
	Listen   opt[string]        `yaml:"listen"`
	CertFile opt[string]        `yaml:"cert_file"`
	KeyFile  opt[string]        `yaml:"key_file"`
	To       yaml.Node          `yaml:"to"`
	Paths    opt[[]opt[string]] `yaml:"paths"`
	Pass     opt[[]opt[string]] `yaml:"passthrough"`
	Answer   yaml.Node          `yaml:"answer"`
	Verify   yaml.Node          `yaml:"verify"`
	Dedupe   yaml.Node          `yaml:"dedupe"`
	Sync     yaml.Node          `yaml:"sync"`
	Sign     yaml.Node          `yaml:"sign"`
	CatchUp  yaml.Node          `yaml:"catch_up"`
}

type rawAnswer struct {
	Status opt[int]    `yaml:"status"`
	Body   opt[string] `yaml:"body"`
}

type rawVerify struct {
	Scheme     opt[string]   `yaml:"scheme"`
	SecretFile opt[string]   `yaml:"secret_file"`
	SecretEnv  opt[string]   `yaml:"secret_env"`
	Tolerance  opt[Duration] `yaml:"tolerance"`
	Header     opt[string]   `yaml:"header"`
	Algorithm  opt[string]   `yaml:"algorithm"`
	Encoding   opt[string]   `yaml:"encoding"`
	Prefix     opt[string]   `yaml:"prefix"`
}

type rawInboundDedupe struct {
	Header opt[string] `yaml:"header"`
	JSON   opt[string] `yaml:"json"`
}

type rawSync struct {
	Path   opt[string] `yaml:"path"`
	Method opt[string] `yaml:"method"`
	JSON   opt[string] `yaml:"json"`
	Value  opt[string] `yaml:"value"`
}

var (
	inboundFields = map[string]bool{"name": true, "listen": true, "cert_file": true, "key_file": true, "to": true,
		"paths": true, "passthrough": true, "answer": true, "verify": true, "dedupe": true, "sync": true, "sign": true, "catch_up": true}
	answerFields = map[string]bool{"status": true, "body": true}
	verifyFields = map[string]bool{"scheme": true, "secret_file": true, "secret_env": true, "tolerance": true,
		"header": true, "algorithm": true, "encoding": true, "prefix": true}
	inboundDedupeFields = map[string]bool{"header": true, "json": true}
	syncFields          = map[string]bool{"path": true, "method": true, "json": true, "value": true}
)

// resolveInbound resolves the inbound list over c. A route's sign block
// is the route's own, with InboundSignPrefix; what egress opens for the
// app is its To's host and port alone (the server gives them to the
// guard), never a host name or address on every port.
func resolveInbound(p *problems, n *yaml.Node, c *Config) {
	n = deref(n)
	if n.Kind == 0 || n.ShortTag() == "!!null" {
		return
	}
	if n.Kind != yaml.SequenceNode {
		p.add(n.Line, "inbound", "want a list of routes, got %s", quoteNode(n))
		return
	}
	names, listens := map[string]bool{}, map[string]bool{}
	for i, e := range n.Content {
		path := fmt.Sprintf("inbound[%d]", i)
		rt, ok := resolveRoute(p, path, deref(e), c)
		if !ok {
			continue
		}
		if rt.Name == "" {
			rt.Name = path
		}
		if names[rt.Name] {
			p.add(e.Line, path+".name", "route name %q is used twice", rt.Name)
		}
		if listens[rt.Listen] && !strings.HasSuffix(rt.Listen, ":0") {
			p.add(e.Line, path+".listen", "address %s is used by another route", rt.Listen)
		}
		if (rt.Listen == c.Listen || rt.Listen == c.Admin) && !strings.HasSuffix(rt.Listen, ":0") {
			p.add(e.Line, path+".listen", "same address as hookpace's proxy or admin listener (%s)", rt.Listen)
		}
		names[rt.Name], listens[rt.Listen] = true, true
		c.Inbound = append(c.Inbound, rt)
	}
}

func resolveRoute(p *problems, path string, n *yaml.Node, c *Config) (InboundRoute, bool) {
	var r rawInbound
	if !decodeBlock(p, path, n, inboundFields, "listen, to, paths, passthrough, answer, verify, dedupe, sync, sign, catch_up", &r) {
		if n.Kind == 0 {
			p.add(n.Line, path, "want a route (listen, to, ...)")
		}
		return InboundRoute{}, false
	}
	f := func(name string) string { return path + "." + name }
	rt := InboundRoute{Line: n.Line}
	field(p, f("name"), r.Name, &rt.Name, nonEmpty)
	if !field(p, f("listen"), r.Listen, &rt.Listen, checkListen) && r.Listen.Err == nil {
		p.add(n.Line, f("listen"), "required: the address providers post to, e.g. 0.0.0.0:8081")
	}
	field(p, f("cert_file"), r.CertFile, &rt.CertFile, nonEmpty)
	field(p, f("key_file"), r.KeyFile, &rt.KeyFile, nonEmpty)
	if (rt.CertFile == "") != (rt.KeyFile == "") {
		p.add(n.Line, path, "set both cert_file and key_file (TLS), or neither (plain HTTP)")
	}
	rt.Targets = resolveTargets(p, f("to"), deref(&r.To), n.Line)
	if len(rt.Targets) == 0 {
		return rt, false
	}
	rt.To, rt.Host = rt.Targets[0].URL, rt.Targets[0].Host
	list(p, f("paths"), r.Paths, &rt.Paths, checkGlob, true)
	list(p, f("passthrough"), r.Pass, &rt.Passthrough, checkGlob, true)
	resolveAnswer(p, f("answer"), deref(&r.Answer), &rt.Answer)
	rt.Verify = resolveVerify(p, f("verify"), deref(&r.Verify))
	resolveInboundDedupe(p, f("dedupe"), deref(&r.Dedupe), &rt.Dedupe)
	rt.Sync = resolveSync(p, f("sync"), deref(&r.Sync))
	rt.Sign = resolveInboundSign(p, f("sign"), deref(&r.Sign))
	rt.CatchUp = resolveCatchUp(p, f("catch_up"), deref(&r.CatchUp), &rt, c)
	return rt, true
}

func resolveAnswer(p *problems, path string, n *yaml.Node, a *InboundAnswer) {
	var r rawAnswer
	if !decodeBlock(p, path, n, answerFields, "status, body", &r) {
		return
	}
	a.Status = http.StatusAccepted
	field(p, path+".status", r.Status, &a.Status, func(s int) error {
		if s < 200 || s > 299 {
			return fmt.Errorf("want a 2xx status (it acknowledges the webhook), got %d", s)
		}
		return nil
	})
	field(p, path+".body", r.Body, &a.Body, nil)
}

func resolveVerify(p *problems, path string, n *yaml.Node) *InboundVerify {
	var r rawVerify
	if !decodeBlock(p, path, n, verifyFields, "scheme, secret_file, tolerance, ...", &r) {
		return nil
	}
	f := func(name string) string { return path + "." + name }
	v := &InboundVerify{Field: path, Line: n.Line, Tolerance: Duration(5 * time.Minute)}
	schemes := []string{VerifyStandardWebhooks, VerifyStripe, VerifyGitHub, VerifyShopify, VerifySlack, VerifyHMAC}
	if !field(p, f("scheme"), r.Scheme, &v.Scheme, oneOf(schemes...)) {
		if !r.Scheme.Set && r.Scheme.Err == nil {
			p.add(n.Line, f("scheme"), "required: one of %s", strings.Join(schemes, ", "))
		}
		return nil
	}
	field(p, f("tolerance"), r.Tolerance, &v.Tolerance, positive)
	switch {
	case r.SecretFile.Set == r.SecretEnv.Set:
		p.add(n.Line, path, "needs one secret: secret_file or secret_env")
	case r.SecretFile.Set:
		v.Secret = Secret{Kind: "file", Field: f("secret_file"), Line: r.SecretFile.Line}
		field(p, v.Secret.Field, r.SecretFile, &v.Secret.Name, nonEmpty)
	default:
		v.Secret = Secret{Kind: "env", Field: f("secret_env"), Line: r.SecretEnv.Line}
		field(p, v.Secret.Field, r.SecretEnv, &v.Secret.Name, nonEmpty)
	}
	v.Secret.Name = strings.TrimSpace(v.Secret.Name)
	hmacOnly := map[string]opt[string]{"header": r.Header, "algorithm": r.Algorithm, "encoding": r.Encoding, "prefix": r.Prefix}
	if v.Scheme != VerifyHMAC {
		for name, o := range hmacOnly {
			if o.Set {
				p.add(o.Line, f(name), "only for scheme hmac (%s has its own)", v.Scheme)
			}
		}
		return v
	}
	v.Algorithm, v.Encoding = "sha256", "hex"
	if !field(p, f("header"), r.Header, &v.Header, checkHeaderName) && !r.Header.Set && r.Header.Err == nil {
		p.add(n.Line, f("header"), "required with scheme hmac: the header that carries the signature")
	}
	field(p, f("algorithm"), r.Algorithm, &v.Algorithm, oneOf("sha256", "sha1", "sha512"))
	field(p, f("encoding"), r.Encoding, &v.Encoding, oneOf("hex", "base64"))
	field(p, f("prefix"), r.Prefix, &v.Prefix, nil)
	return v
}

func resolveInboundDedupe(p *problems, path string, n *yaml.Node, d *InboundDedupe) {
	var r rawInboundDedupe
	if !decodeBlock(p, path, n, inboundDedupeFields, "header or json", &r) {
		return
	}
	if r.Header.Set == r.JSON.Set {
		p.add(n.Line, path, "want one of header (e.g. webhook-id, X-GitHub-Delivery) or json (e.g. id)")
		return
	}
	field(p, path+".header", r.Header, &d.Header, checkHeaderName)
	field(p, path+".json", r.JSON, &d.JSON, nonEmpty)
}

func resolveSync(p *problems, path string, n *yaml.Node) []SyncRule {
	if n.Kind == 0 || n.ShortTag() == "!!null" {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.add(n.Line, path, "want a list of rules ({path, method, json, value}), got %s", quoteNode(n))
		return nil
	}
	var out []SyncRule
	for i, e := range n.Content {
		rpath := fmt.Sprintf("%s[%d]", path, i)
		var r rawSync
		if !decodeBlock(p, rpath, deref(e), syncFields, "path, method, json, value", &r) {
			continue
		}
		var s SyncRule
		field(p, rpath+".path", r.Path, &s.Path, checkGlob)
		field(p, rpath+".method", r.Method, &s.Method, nonEmpty)
		s.Method = strings.ToUpper(s.Method)
		field(p, rpath+".json", r.JSON, &s.JSON, nonEmpty)
		field(p, rpath+".value", r.Value, &s.Value, nil)
		switch {
		case r.JSON.Set != r.Value.Set:
			p.add(e.Line, rpath, "json and value go together (e.g. {json: type, value: url_verification})")
		case !r.Path.Set && !r.Method.Set && !r.JSON.Set:
			p.add(e.Line, rpath, "needs a condition: path, method, or json with value")
		default:
			out = append(out, s)
		}
	}
	return out
}

// resolveInboundSign resolves a route's sign block: standard-webhooks
// under InboundSignPrefix. Nil without one.
func resolveInboundSign(p *problems, path string, n *yaml.Node) *Signing {
	if n.Kind == 0 {
		return nil
	}
	sc := resolveSign(p, path, n, nil)
	if sc == nil {
		return nil
	}
	if sc.Scheme != sign.StandardWebhooks {
		p.add(n.Line, path+".scheme", "an inbound route signs with standard-webhooks (under %s*)", InboundSignPrefix)
		return nil
	}
	sc.Prefix = InboundSignPrefix
	return sc
}

// InboundWarnings are what check-config and the start say of routes that
// take a replay as a new webhook: a dedupe key in a header that the
// provider's signature does not cover (only standard-webhooks signs one,
// webhook-id) can be changed by whoever holds one validly signed body,
// and a route without verify checks nothing. Each names the field and
// line.
func (c *Config) InboundWarnings() []string {
	var out []string
	for i, rt := range c.Inbound {
		at := fmt.Sprintf("%s:%d: inbound[%d]", c.Path, rt.Line, i)
		switch v := rt.Verify; {
		case v == nil && (rt.Dedupe.Header != "" || rt.Dedupe.JSON != ""):
			out = append(out, fmt.Sprintf("%s.dedupe: the route has no verify: anyone can post a delivery id and take it before the provider does", at))
		case v != nil && rt.Dedupe.Header != "" && (v.Scheme != VerifyStandardWebhooks || !strings.EqualFold(rt.Dedupe.Header, sign.HeaderID)):
			out = append(out, fmt.Sprintf("%s.dedupe.header: %s is not covered by %s's signature: a replayed body under a new %s is a new webhook; dedupe by a field of the signed body (json) where the provider has one", at, rt.Dedupe.Header, v.Scheme, rt.Dedupe.Header))
		}
	}
	return out
}

// checkAppURL accepts an absolute http or https URL with a host and no
// query: webhook paths are appended to it.
func checkAppURL(s string) error {
	if err := checkEventsURL(s); err != nil {
		return err
	}
	u, _ := url.Parse(s)
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("want a base URL without query or fragment, got %q", s)
	}
	return nil
}

func checkGlob(s string) error {
	if !strings.HasPrefix(s, "/") {
		return fmt.Errorf("want a path starting with /, got %q", s)
	}
	if _, err := path.Match(s, "/"); err != nil {
		return fmt.Errorf("malformed glob %q: %v", s, err)
	}
	return nil
}

// inboundRestart names the inbound settings a reload can't apply: the
// routes are bound at start.
func inboundRestart(old, new []InboundRoute) []string {
	if !reflect.DeepEqual(old, new) {
		return []string{"inbound"}
	}
	return nil
}
