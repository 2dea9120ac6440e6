package config

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/hookpace/hookpace/sign"
	"gopkg.in/yaml.v3"
)

// Signing is a host's `sign` block: how hookpace signs each
// delivery attempt. The config says where the secrets are; they are read,
// and the signer built, by the loader of the files the config names
// (server.LoadFiles) at check-config, at start and on each reload, so a
// rotation is a file change and a reload.
//
//	sign:
//	  scheme: standard-webhooks   # or hmac-sha256, or none
//	  secret_file: /run/secrets/partner-whsec
//
// A host's sign block replaces the one in defaults as a whole.
type Signing struct {
	Scheme  string   // sign.StandardWebhooks, sign.StandardWebhooksV1a or sign.HMACSHA256
	Header  string   // hmac-sha256: the header that carries sha256=<hex>
	Replace bool     // overwrite signature headers the app sent
	Prefix  string   // before each Standard Webhooks header name ("" = the standard names)
	Secrets []Secret // where each secret is, never the secret itself (v1a: optional, v1 signatures beside)
	// KeyFiles are v1a's Ed25519 private keys (1 or 2: rotation); none:
	// hookpace's own, created beside the spool (Config.SignKeyPath).
	KeyFiles []Secret
	// PerHost (v1a) signs each destination host with a key of its own,
	// derived from the block's key (sign.HostKey): by default with
	// hookpace's own key, not with key files (per_host sets either way).
	PerHost bool
	Field   string // the block's path ("defaults.sign", `hosts["a.example"].sign`)
	Line    int    // the block's line
}

// Secret is where one signing secret is: a file or an environment
// variable, with the field and line that name it.
type Secret struct {
	Kind  string // "file" or "env"
	Name  string // the file's path or the variable's name
	Field string
	Line  int
}

func (s Secret) String() string { return s.Kind + " " + s.Name }

// SignNone turns signing off for a host when defaults sign.
const SignNone = "none"

type rawSign struct {
	Scheme     opt[string]        `yaml:"scheme"`
	SecretFile opt[string]        `yaml:"secret_file"`
	SecretEnv  opt[string]        `yaml:"secret_env"`
	Secrets    yaml.Node          `yaml:"secrets"` // see secretSources
	Header     opt[string]        `yaml:"header"`
	Replace    opt[bool]          `yaml:"replace"`
	KeyFile    opt[string]        `yaml:"key_file"`
	KeyFiles   opt[[]opt[string]] `yaml:"key_files"`
	PerHost    opt[bool]          `yaml:"per_host"`
}

type rawSecret struct {
	File opt[string] `yaml:"file"`
	Env  opt[string] `yaml:"env"`
}

var (
	signFields = map[string]bool{"scheme": true, "secret_file": true, "secret_env": true, "secrets": true, "header": true, "replace": true,
		"key_file": true, "key_files": true, "per_host": true}
	secretFields = map[string]bool{"file": true, "env": true}
)

// resolveSign resolves the sign block at n (path is e.g. "defaults.sign").
// It returns base when n is absent, nil for `scheme: none`, and base after
// recording problems when the block is invalid.
func resolveSign(p *problems, path string, n *yaml.Node, base *Signing) *Signing {
	var r rawSign
	if n = deref(n); !decodeBlock(p, path, n, signFields, "scheme, secret_file, secret_env, secrets, header, replace, key_file, key_files, per_host", &r) {
		return base
	}
	f := func(name string) string { return path + "." + name }
	sc := &Signing{}
	if !r.Scheme.Set && r.Scheme.Err == nil {
		p.add(n.Line, f("scheme"), "required: %s, %s, %s or %s", sign.StandardWebhooks, sign.StandardWebhooksV1a, sign.HMACSHA256, SignNone)
		return base
	}
	if !field(p, f("scheme"), r.Scheme, &sc.Scheme, oneOf(sign.StandardWebhooks, sign.StandardWebhooksV1a, sign.HMACSHA256, SignNone)) {
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
	case sc.Scheme != sign.HMACSHA256 && r.Header.Set:
		p.add(r.Header.Line, f("header"), "only for scheme hmac-sha256 (%s sends webhook-signature)", sc.Scheme)
	case sc.Scheme == sign.HMACSHA256 && isStandardHeader(sc.Header):
		p.add(r.Header.Line, f("header"), "%s is a Standard Webhooks header: use scheme standard-webhooks", sc.Header)
	}
	if sc.Scheme == sign.StandardWebhooksV1a {
		return resolveV1a(p, path, n, &r, sc, base)
	}
	if r.KeyFile.Set || r.KeyFiles.Set {
		p.add(firstLine(r.KeyFile.Line, r.KeyFiles.Line), f("key_file"), "only for scheme %s (Ed25519 keys)", sign.StandardWebhooksV1a)
	}
	if r.PerHost.Set {
		p.add(r.PerHost.Line, f("per_host"), "only for scheme %s (Ed25519 keys)", sign.StandardWebhooksV1a)
	}
	srcs := secretSources(p, path, n, &r)
	if len(srcs) == 0 {
		return base
	}
	if sc.Scheme == sign.HMACSHA256 && len(srcs) > 1 {
		p.add(srcs[1].Line, f("secrets"), "hmac-sha256 takes one secret (rotation with two is for standard-webhooks)")
		return base
	}
	sc.Secrets, sc.Field, sc.Line = srcs, path, n.Line
	return sc
}

// resolveV1a resolves the rest of a v1a sign block: its keys, and the v1
// secrets that also sign during a migration.
func resolveV1a(p *problems, path string, n *yaml.Node, r *rawSign, sc *Signing, base *Signing) *Signing {
	before := len(p.errs)
	f := func(name string) string { return path + "." + name }
	switch {
	case r.KeyFile.Set && r.KeyFiles.Set:
		p.add(r.KeyFiles.Line, f("key_files"), "set one of key_file and key_files")
	case r.KeyFile.Set || r.KeyFile.Err != nil:
		var v string
		if field(p, f("key_file"), r.KeyFile, &v, nonEmpty) {
			sc.KeyFiles = []Secret{{Kind: "file", Name: strings.TrimSpace(v), Field: f("key_file"), Line: r.KeyFile.Line}}
		}
	case r.KeyFiles.Set || r.KeyFiles.Err != nil:
		var vs []string
		list(p, f("key_files"), r.KeyFiles, &vs, nonEmpty, true)
		if len(vs) > sign.MaxSecrets {
			p.add(r.KeyFiles.Line, f("key_files"), "want 1 or %d key files (rotation), got %d", sign.MaxSecrets, len(vs))
		}
		for i, v := range vs {
			sc.KeyFiles = append(sc.KeyFiles, Secret{Kind: "file", Name: strings.TrimSpace(v),
				Field: fmt.Sprintf("%s[%d]", f("key_files"), i), Line: r.KeyFiles.V[i].Line})
		}
	}
	if r.SecretFile.Set || r.SecretEnv.Set || deref(&r.Secrets).Kind != 0 || r.SecretFile.Err != nil || r.SecretEnv.Err != nil {
		sc.Secrets = secretSources(p, path, n, r) // v1 beside v1a, for a migration
	}
	sc.PerHost = len(sc.KeyFiles) == 0
	field(p, f("per_host"), r.PerHost, &sc.PerHost, nil)
	if len(p.errs) > before {
		return base
	}
	sc.Field, sc.Line = path, n.Line
	return sc
}

// secretSources returns the secrets named by secret_file, secret_env or
// secrets (exactly one of them), recording problems in p.
func secretSources(p *problems, path string, n *yaml.Node, r *rawSign) []Secret {
	var out []Secret
	var set []string
	one := func(fieldPath, kind string, o opt[string]) {
		var v string
		if field(p, fieldPath, o, &v, nonEmpty) {
			out = append(out, Secret{Field: fieldPath, Kind: kind, Name: strings.TrimSpace(v), Line: o.Line})
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
			if s, ok := secretEntry(p, fmt.Sprintf("%s[%d]", spath, i), e); ok {
				out = append(out, s)
			}
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

// secretEntry reads one {file: PATH} or {env: NAME} at n (path names it),
// recording problems in p; ok is false when there is none to use.
func secretEntry(p *problems, path string, n *yaml.Node) (s Secret, ok bool) {
	n = deref(n)
	var rs rawSecret
	if n.Kind != yaml.MappingNode {
		p.add(n.Line, path, "want {file: PATH} or {env: NAME}, got %s", quoteNode(n))
		return Secret{}, false
	}
	checkKnownFields(n, path, secretFields, map[*yaml.Node]bool{}, p)
	if err := n.Decode(&rs); err != nil {
		p.add(n.Line, path, "%v", err)
		return Secret{}, false
	}
	if rs.File.Set == rs.Env.Set {
		p.add(n.Line, path, "want exactly one of file or env")
		return Secret{}, false
	}
	s = Secret{Kind: "file", Field: path + ".file", Line: rs.File.Line}
	o := rs.File
	if rs.Env.Set {
		s, o = Secret{Kind: "env", Field: path + ".env", Line: rs.Env.Line}, rs.Env
	}
	if !field(p, s.Field, o, &s.Name, nonEmpty) {
		return Secret{}, false
	}
	s.Name = strings.TrimSpace(s.Name)
	return s, true
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
