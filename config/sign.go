package config

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/hookpace/hookpace/sign"
	"gopkg.in/yaml.v3"
)

// Signing is a host's `sign` block (issue 24): how hookpace signs each
// delivery attempt. The secrets are read when the config is loaded (and
// again on each reload), so a rotation is a file change and a reload.
//
//	sign:
//	  scheme: standard-webhooks   # or hmac-sha256, or none
//	  secret_file: /run/secrets/partner-whsec
//
// A host's sign block replaces the one in defaults as a whole.
type Signing struct {
	Scheme  string // sign.StandardWebhooks or sign.HMACSHA256
	Header  string // hmac-sha256: the header that carries sha256=<hex>
	Replace bool   // overwrite signature headers the app sent
	// Sources say where each secret came from ("file PATH", "env NAME"),
	// never the secret itself.
	Sources []string
	Signer  *sign.Signer
}

// SignNone turns signing off for a host when defaults sign.
const SignNone = "none"

type rawSign struct {
	Scheme     opt[string] `yaml:"scheme"`
	SecretFile opt[string] `yaml:"secret_file"`
	SecretEnv  opt[string] `yaml:"secret_env"`
	Secrets    yaml.Node   `yaml:"secrets"` // see secretSources
	Header     opt[string] `yaml:"header"`
	Replace    opt[bool]   `yaml:"replace"`
}

type rawSecret struct {
	File opt[string] `yaml:"file"`
	Env  opt[string] `yaml:"env"`
}

var (
	signFields   = map[string]bool{"scheme": true, "secret_file": true, "secret_env": true, "secrets": true, "header": true, "replace": true}
	secretFields = map[string]bool{"file": true, "env": true}
)

// secretSource is one secret_file or secret_env, with its field and line.
type secretSource struct {
	path, kind, val string
	line            int
}

// resolveSign resolves the sign block at n (path is e.g. "defaults.sign").
// It returns base when n is absent, nil for `scheme: none`, and base after
// recording problems when the block is invalid.
func resolveSign(p *problems, path string, n *yaml.Node, base *Signing) *Signing {
	before := len(p.errs)
	var r rawSign
	if n = deref(n); !decodeBlock(p, path, n, signFields, "scheme, secret_file, secret_env, secrets, header, replace", &r) {
		return base
	}
	f := func(name string) string { return path + "." + name }
	sc := &Signing{}
	if !r.Scheme.Set && r.Scheme.Err == nil {
		p.add(n.Line, f("scheme"), "required: %s, %s or %s", sign.StandardWebhooks, sign.HMACSHA256, SignNone)
		return base
	}
	if !field(p, f("scheme"), r.Scheme, &sc.Scheme, oneOf(sign.StandardWebhooks, sign.HMACSHA256, SignNone)) {
		return base
	}
	if sc.Scheme == SignNone {
		return nil
	}
	field(p, f("header"), r.Header, &sc.Header, checkHeaderName)
	field(p, f("replace"), r.Replace, &sc.Replace, nil)
	switch {
	case sc.Scheme == sign.HMACSHA256 && sc.Header == "" && r.Header.Err == nil:
		p.add(n.Line, f("header"), "required with scheme hmac-sha256 (the header that carries sha256=<hex>)")
	case sc.Scheme == sign.StandardWebhooks && r.Header.Set:
		p.add(r.Header.Line, f("header"), "only for scheme hmac-sha256 (standard-webhooks sends webhook-signature)")
	case sc.Scheme == sign.HMACSHA256 && isStandardHeader(sc.Header):
		p.add(r.Header.Line, f("header"), "%s is a Standard Webhooks header: use scheme standard-webhooks", sc.Header)
	}
	srcs := secretSources(p, path, n, &r)
	if len(srcs) == 0 {
		return base
	}
	if sc.Scheme == sign.HMACSHA256 && len(srcs) > 1 {
		p.add(srcs[1].line, f("secrets"), "hmac-sha256 takes one secret (rotation with two is for standard-webhooks)")
		return base
	}
	keys := make([][]byte, 0, len(srcs))
	for _, s := range srcs {
		key, err := readSecret(sc.Scheme, s)
		if err != nil {
			p.add(s.line, s.path, "%v", err)
			continue
		}
		keys = append(keys, key)
		sc.Sources = append(sc.Sources, s.kind+" "+s.val)
	}
	if len(p.errs) > before {
		return base
	}
	signer, err := sign.New(sign.Options{Scheme: sc.Scheme, Secrets: keys, Header: sc.Header, Replace: sc.Replace})
	if err != nil {
		p.add(n.Line, path, "%v", err)
		return base
	}
	sc.Signer = signer
	return sc
}

// secretSources returns the secrets named by secret_file, secret_env or
// secrets (exactly one of them), recording problems in p.
func secretSources(p *problems, path string, n *yaml.Node, r *rawSign) []secretSource {
	var out []secretSource
	var set []string
	one := func(fieldPath, kind string, o opt[string]) {
		var v string
		if field(p, fieldPath, o, &v, nonEmpty) {
			out = append(out, secretSource{path: fieldPath, kind: kind, val: strings.TrimSpace(v), line: o.Line})
		}
	}
	if r.SecretFile.Set || r.SecretFile.Err != nil {
		set = append(set, "secret_file")
		one(path+".secret_file", "file", r.SecretFile)
	}
	if r.SecretEnv.Set || r.SecretEnv.Err != nil {
		set = append(set, "secret_env")
		one(path+".secret_env", "env", r.SecretEnv)
	}
	if l := deref(&r.Secrets); l.Kind != 0 {
		set = append(set, "secrets")
		spath := path + ".secrets"
		if l.Kind != yaml.SequenceNode || len(l.Content) < 1 || len(l.Content) > sign.MaxSecrets {
			p.add(l.Line, spath, "want a list of 1 or %d secrets ({file: PATH} or {env: NAME}), got %s", sign.MaxSecrets, quoteNode(l))
			return nil
		}
		for i, e := range l.Content {
			epath := fmt.Sprintf("%s[%d]", spath, i)
			e = deref(e)
			var rs rawSecret
			if e.Kind != yaml.MappingNode {
				p.add(e.Line, epath, "want {file: PATH} or {env: NAME}, got %s", quoteNode(e))
				continue
			}
			checkKnownFields(e, epath, secretFields, map[*yaml.Node]bool{}, p)
			if err := e.Decode(&rs); err != nil {
				p.add(e.Line, epath, "%v", err)
				continue
			}
			if rs.File.Set == rs.Env.Set {
				p.add(e.Line, epath, "want exactly one of file or env")
				continue
			}
			one(epath+".file", "file", rs.File)
			one(epath+".env", "env", rs.Env)
		}
	}
	switch {
	case len(set) == 0:
		p.add(n.Line, path, "needs a secret: secret_file, secret_env or secrets")
		return nil
	case len(set) > 1:
		p.add(n.Line, path, "set one of secret_file, secret_env and secrets, not %s", strings.Join(set, " and "))
		return nil
	}
	return out
}

// readSecret reads one secret: for standard-webhooks "whsec_" and base64,
// for hmac-sha256 the text itself (less surrounding white space).
func readSecret(scheme string, s secretSource) ([]byte, error) {
	var text string
	switch s.kind {
	case "file":
		b, err := os.ReadFile(s.val)
		if err != nil {
			return nil, err
		}
		text = strings.TrimSpace(string(b))
	case "env":
		text = strings.TrimSpace(os.Getenv(s.val))
		if text == "" {
			return nil, fmt.Errorf("environment variable %s is not set or empty", s.val)
		}
	}
	if scheme == sign.StandardWebhooks {
		key, err := sign.ParseSecret(text)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", s.kind, s.val, err)
		}
		return key, nil
	}
	if text == "" {
		return nil, errors.New("secret is empty")
	}
	return []byte(text), nil
}

func isStandardHeader(h string) bool {
	switch http.CanonicalHeaderKey(h) {
	case "Webhook-Id", "Webhook-Timestamp", "Webhook-Signature":
		return true
	}
	return false
}

// decodeBlock decodes a host's sub-block (sign, batch) at n into raw,
// reporting a value that is not a mapping, unknown fields and decoding
// errors under path. It reports whether there is a block to resolve: false
// when n is absent or unusable.
func decodeBlock(p *problems, path string, n *yaml.Node, fields map[string]bool, want string, raw any) bool {
	if n.Kind == 0 {
		return false
	}
	if n.Kind != yaml.MappingNode {
		p.add(n.Line, path, "want a mapping (%s), got %s", want, quoteNode(n))
		return false
	}
	checkKnownFields(n, path, fields, map[*yaml.Node]bool{}, p)
	if err := n.Decode(raw); err != nil {
		p.add(n.Line, path, "%v", err)
		return false
	}
	return true
}
