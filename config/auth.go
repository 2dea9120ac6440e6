package config

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Auth is a host's `auth` block: the credentials hookpace
// attaches to each delivery attempt, so that apps need not hold partners'
// secrets and a webhook that waited in the spool goes with a fresh token.
// The config says where the secrets are, never what they are; the loader
// of the files the config names (server.LoadFiles) reads them.
//
//	auth:
//	  mtls: {cert_file: /run/secrets/client.crt, key_file: /run/secrets/client.key}
//	  oauth2:
//	    token_url: https://auth.partner.example/oauth/token
//	    client_id: hookpace
//	    client_secret_file: /run/secrets/partner-client-secret
//	  headers:
//	    X-Api-Key: {file: /run/secrets/partner-api-key}
//
// A host's auth block replaces the one in defaults as a whole; `auth: {}`
// turns it off for the host.
type Auth struct {
	MTLS           *MTLS
	OAuth2         *OAuth2
	Headers        []AuthHeader // by name
	KeepAppHeaders bool         // what the app sent under the same names stays
	Field          string
	Line           int
}

// MTLS is the client certificate presented to the host.
type MTLS struct {
	CertFile, KeyFile string
	Field             string
	Line              int
}

// OAuth2 is a client-credentials grant (RFC 6749 §4.4) whose access token
// goes with each attempt as Authorization: Bearer.
type OAuth2 struct {
	TokenURL     string
	ClientID     string
	ClientSecret Secret
	Scopes       []string
	Audience     string            // sent as the audience parameter when set
	Params       map[string]string // further token request parameters
	Field        string
	Line         int
	TokenURLLine int // the line of token_url
}

// AuthHeader is a header whose value is a secret, set on each attempt.
type AuthHeader struct {
	Name  string // canonical
	Value Secret
}

type rawHostAuth struct {
	MTLS           yaml.Node `yaml:"mtls"`
	OAuth2         yaml.Node `yaml:"oauth2"`
	Headers        yaml.Node `yaml:"headers"`
	KeepAppHeaders opt[bool] `yaml:"keep_app_headers"`
}

type rawHostMTLS struct {
	CertFile opt[string] `yaml:"cert_file"`
	KeyFile  opt[string] `yaml:"key_file"`
}

type rawOAuth2 struct {
	TokenURL         opt[string]            `yaml:"token_url"`
	ClientID         opt[string]            `yaml:"client_id"`
	ClientSecretFile opt[string]            `yaml:"client_secret_file"`
	ClientSecretEnv  opt[string]            `yaml:"client_secret_env"`
	Scopes           opt[[]opt[string]]     `yaml:"scopes"`
	Audience         opt[string]            `yaml:"audience"`
	Params           opt[map[string]string] `yaml:"params"`
}

var (
	authFields   = map[string]bool{"mtls": true, "oauth2": true, "headers": true, "keep_app_headers": true}
	mtlsFields   = map[string]bool{"cert_file": true, "key_file": true}
	oauth2Fields = map[string]bool{"token_url": true, "client_id": true, "client_secret_file": true, "client_secret_env": true,
		"scopes": true, "audience": true, "params": true}
)

// resolveAuth resolves the auth block at n (path is e.g. "defaults.auth").
// It returns base when n is absent or invalid (after recording why), nil
// for an empty block.
func resolveAuth(p *problems, path string, n *yaml.Node, base *Auth) *Auth {
	var r rawHostAuth
	if n = deref(n); !decodeBlock(p, path, n, authFields, "mtls, oauth2, headers, keep_app_headers", &r) {
		return base
	}
	if len(n.Content) == 0 {
		return nil
	}
	f := func(name string) string { return path + "." + name }
	a := &Auth{Field: path, Line: n.Line}
	before := len(p.errs)
	field(p, f("keep_app_headers"), r.KeepAppHeaders, &a.KeepAppHeaders, nil)
	a.MTLS = resolveMTLS(p, f("mtls"), &r.MTLS)
	a.OAuth2 = resolveOAuth2(p, f("oauth2"), &r.OAuth2)
	a.Headers = resolveAuthHeaders(p, f("headers"), &r.Headers)
	if a.OAuth2 != nil && slices.ContainsFunc(a.Headers, func(h AuthHeader) bool { return h.Name == "Authorization" }) {
		p.add(a.OAuth2.Line, f("headers"), "Authorization is set by oauth2: not in headers too")
	}
	if len(p.errs) > before {
		return base
	}
	return a
}

func resolveMTLS(p *problems, path string, n *yaml.Node) *MTLS {
	var r rawHostMTLS
	if n = deref(n); !decodeBlock(p, path, n, mtlsFields, "cert_file, key_file", &r) {
		return nil
	}
	m := &MTLS{Field: path, Line: n.Line}
	for _, fl := range []struct {
		name string
		o    opt[string]
		dst  *string
	}{{"cert_file", r.CertFile, &m.CertFile}, {"key_file", r.KeyFile, &m.KeyFile}} {
		if !fl.o.Set && fl.o.Err == nil {
			p.add(n.Line, path+"."+fl.name, "required (a PEM file)")
		}
		field(p, path+"."+fl.name, fl.o, fl.dst, nonEmpty)
	}
	return m
}

func resolveOAuth2(p *problems, path string, n *yaml.Node) *OAuth2 {
	var r rawOAuth2
	if n = deref(n); !decodeBlock(p, path, n, oauth2Fields, "token_url, client_id, client_secret_file, client_secret_env, scopes, audience, params", &r) {
		return nil
	}
	f := func(name string) string { return path + "." + name }
	o := &OAuth2{Field: path, Line: n.Line}
	if !r.TokenURL.Set && r.TokenURL.Err == nil {
		p.add(n.Line, f("token_url"), "required")
	}
	field(p, f("token_url"), r.TokenURL, &o.TokenURL, checkTokenURL)
	o.TokenURLLine = r.TokenURL.Line
	if !r.ClientID.Set && r.ClientID.Err == nil {
		p.add(n.Line, f("client_id"), "required")
	}
	field(p, f("client_id"), r.ClientID, &o.ClientID, nonEmpty)
	switch {
	case r.ClientSecretFile.Set && r.ClientSecretEnv.Set:
		p.add(r.ClientSecretEnv.Line, f("client_secret_env"), "set one of client_secret_file and client_secret_env")
	case r.ClientSecretFile.Set || r.ClientSecretFile.Err != nil:
		o.ClientSecret = Secret{Kind: "file", Field: f("client_secret_file"), Line: r.ClientSecretFile.Line}
		field(p, f("client_secret_file"), r.ClientSecretFile, &o.ClientSecret.Name, nonEmpty)
	case r.ClientSecretEnv.Set || r.ClientSecretEnv.Err != nil:
		o.ClientSecret = Secret{Kind: "env", Field: f("client_secret_env"), Line: r.ClientSecretEnv.Line}
		field(p, f("client_secret_env"), r.ClientSecretEnv, &o.ClientSecret.Name, nonEmpty)
	default:
		p.add(n.Line, path, "needs the client secret: client_secret_file or client_secret_env")
	}
	list(p, f("scopes"), r.Scopes, &o.Scopes, nonEmpty, false)
	field(p, f("audience"), r.Audience, &o.Audience, nil)
	field(p, f("params"), r.Params, &o.Params, func(m map[string]string) error {
		for k := range m {
			switch k {
			case "grant_type", "client_id", "client_secret", "scope", "audience":
				return fmt.Errorf("%s is set by hookpace (its own field or the grant)", k)
			}
		}
		return nil
	})
	return o
}

// PlainTokenURLs names each auth.oauth2.token_url that is http://: the
// client secret goes to it in clear. check-config and the start warn of
// each, with its field and line; hosts without their own auth block share
// defaults' and are not named again.
func (c *Config) PlainTokenURLs() []string {
	var out []string
	seen := map[*OAuth2]bool{}
	add := func(a *Auth) {
		if a == nil || a.OAuth2 == nil || seen[a.OAuth2] || !strings.HasPrefix(strings.ToLower(a.OAuth2.TokenURL), "http://") {
			return
		}
		seen[a.OAuth2] = true
		o := a.OAuth2
		out = append(out, fmt.Sprintf("line %d: %s.token_url is http:// (%s): the client secret and the tokens cross the network in clear; use https://",
			o.TokenURLLine, o.Field, o.TokenURL))
	}
	add(c.Defaults.Auth)
	keys := make([]string, 0, len(c.Hosts))
	for k := range c.Hosts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		add(c.Hosts[k].Auth)
	}
	return out
}

// checkTokenURL accepts an absolute http(s) URL; the token endpoint is
// checked by the egress policy when it is asked, as a partner is.
func checkTokenURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("want an http:// or https:// URL, got %q", s)
	}
	return nil
}

func resolveAuthHeaders(p *problems, path string, n *yaml.Node) []AuthHeader {
	if n = deref(n); n.Kind == 0 {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.add(n.Line, path, "want a mapping of header names to {file: PATH} or {env: NAME}, got %s", quoteNode(n))
		return nil
	}
	var out []AuthHeader
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		hpath := path + "." + k.Value
		if err := checkHeaderName(k.Value); err != nil {
			p.add(k.Line, hpath, "%v", err)
			continue
		}
		name := http.CanonicalHeaderKey(k.Value)
		switch name {
		case "Host", "Content-Length", "Transfer-Encoding", "Connection":
			p.add(k.Line, hpath, "%s is not a credential header", name)
			continue
		}
		if s, ok := secretEntry(p, hpath, v); ok {
			out = append(out, AuthHeader{Name: name, Value: s})
		}
	}
	slices.SortFunc(out, func(a, b AuthHeader) int { return strings.Compare(a.Name, b.Name) })
	return out
}
