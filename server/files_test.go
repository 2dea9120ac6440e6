package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/mitm"
)

// writeLeaf writes a self-signed certificate that is not a CA.
func writeLeaf(t *testing.T, dir string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "leaf.example"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "leaf.pem")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Every file the config names is loaded as a start loads it, and a
// problem is a FieldError naming the field and its line.
func TestLoadFiles(t *testing.T) {
	dir := t.TempDir()
	caCert, caKey, err := mitm.InitCA(filepath.Join(dir, "ca"))
	if err != nil {
		t.Fatal(err)
	}
	_, otherKey, err := mitm.InitCA(filepath.Join(dir, "other"))
	if err != nil {
		t.Fatal(err)
	}
	leaf := writeLeaf(t, dir)
	missing := filepath.Join(dir, "missing.pem")
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	token, short := write("token", "0123456789abcdef0123\n"), write("short", "abc\n")
	creds, noColon := write("creds", "gw:secret\n"), write("nocolon", "gw\n")
	whsec, badWhsec := write("whsec", testWhsec+"\n"), write("badwhsec", "whsec_***\n")
	t.Setenv("HOOKPACE_TEST_EMPTY", "")
	handoff := "shutdown:\n  handoff: http://peer:8080\n  handoff_auth_file: "
	signWith := "hosts:\n  a.example:\n    sign:\n      scheme: standard-webhooks\n      "
	for _, tc := range []struct {
		name, yaml string
		want       []string // "line: field: text" pieces, in order; none = ok
	}{
		{"no files", "log: {level: info}\n", nil},
		{"good files", "tls:\n  ca_file: " + caCert + "\nmitm:\n  ca_cert: " + caCert + "\n  ca_key: " + caKey + "\n", nil},
		{"missing tls.ca_file", "tls:\n  ca_file: " + missing + "\n", []string{"f.yaml:2: tls.ca_file: open " + missing}},
		{"private key as tls.ca_file", "tls:\n  ca_file: " + caKey + "\n", []string{"f.yaml:2: tls.ca_file: " + caKey + ": no PEM certificates found"}},
		{"missing mitm files", "mitm:\n  ca_cert: " + missing + "\n  ca_key: " + missing + "\n", []string{"f.yaml:2: mitm.ca_cert: read CA certificate: open " + missing}},
		{"non-CA certificate as mitm CA", "mitm:\n  ca_cert: " + leaf + "\n  ca_key: " + caKey + "\n", []string{"f.yaml:2: mitm.ca_cert: CA certificate", "is not a CA certificate"}},
		{"key of another CA", "mitm:\n  ca_cert: " + caCert + "\n  ca_key: " + otherKey + "\n", []string{"f.yaml:3: mitm.ca_key: CA key", "does not match"}},
		{"both wrong", "tls:\n  ca_file: " + missing + "\nmitm:\n  ca_cert: " + leaf + "\n  ca_key: " + caKey + "\n",
			[]string{"f.yaml:2: tls.ca_file:", "f.yaml:4: mitm.ca_cert:"}},
		{"good secrets", "admin: {token_file: " + token + "}\n" + handoff + creds + "\n" + signWith + "secret_file: " + whsec + "\n", nil},
		{"missing admin token", "admin:\n  token_file: " + missing + "\n", []string{"f.yaml:2: admin.token_file: open " + missing}},
		{"short admin token", "admin:\n  token_file: " + short + "\n", []string{"f.yaml:2: admin.token_file: " + short + ": token must be at least 16 characters"}},
		{"missing hand-off credentials", handoff + missing + "\n", []string{"f.yaml:3: shutdown.handoff_auth_file: open " + missing}},
		{"hand-off credentials without a colon", handoff + noColon + "\n", []string{"f.yaml:3: shutdown.handoff_auth_file: " + noColon + ": want username:password"}},
		{"missing signing secret", signWith + "secret_file: " + missing + "\n", []string{`f.yaml:5: hosts["a.example"].sign.secret_file: open ` + missing}},
		{"signing secret not base64", signWith + "secret_file: " + badWhsec + "\n",
			[]string{`f.yaml:5: hosts["a.example"].sign.secret_file: file ` + badWhsec + `: secret is not "whsec_" followed by base64`}},
		{"empty signing env", signWith + "secret_env: HOOKPACE_TEST_EMPTY\n",
			[]string{`f.yaml:5: hosts["a.example"].sign.secret_env: environment variable HOOKPACE_TEST_EMPTY is not set or empty`}},
		{"missing Redis password file", "fleet:\n  redis: redis://h\n  redis_password_file: " + missing + "\n",
			[]string{"f.yaml:3: fleet.redis_password_file: open " + missing}},
		{"Redis password env not set", "fleet:\n  redis: redis://h\n  redis_password_env: HOOKPACE_NOT_SET_ANYWHERE\n",
			[]string{"f.yaml:3: fleet.redis_password_env: environment variable HOOKPACE_NOT_SET_ANYWHERE is not set"}},
	} {
		cfg, err := config.Parse("f.yaml", []byte(tc.yaml))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		files, err := LoadFiles(cfg)
		if len(tc.want) == 0 {
			if err != nil || files.Roots == nil || cfg.MITM.Enabled() != (files.CA != nil) {
				t.Errorf("%s: %v (files %+v)", tc.name, err, files)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: loaded, want %q", tc.name, tc.want)
			continue
		}
		var fe *config.FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%s: %T is not a *config.FieldError: %v", tc.name, err, err)
		}
		rest := err.Error()
		for _, w := range tc.want {
			i := strings.Index(rest, w)
			if i < 0 {
				t.Errorf("%s: error %q lacks %q (in order)", tc.name, err, w)
				break
			}
			rest = rest[i+len(w):]
		}
	}
}

const testWhsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// What LoadFiles reads is what a start uses: the token, the credentials,
// the Redis password from a file, an environment variable or the URL, and
// a signer for each sign block (one for a block hosts inherit), built from
// files and environment variables.
func TestLoadFilesValues(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Setenv("HOOKPACE_TEST_WHSEC", testWhsec)
	t.Setenv("HOOKPACE_TEST_HMAC", "It's a Secret to Everybody")
	t.Setenv("HOOKPACE_TEST_REDIS_PW", "s3cret")
	whsec := write("whsec", testWhsec+"\n")
	yaml := "admin: {token_file: " + write("token", " 0123456789abcdef0123\n") + "}\n" +
		"shutdown: {handoff: \"http://peer:8080\", handoff_auth_file: " + write("creds", "gw:pa:ss\r\n") + "}\n" +
		"fleet: {redis: \"redis://h:6379\", redis_password_file: " + write("pw", "from-file\n") + "}\n" +
		"defaults:\n  sign: {scheme: standard-webhooks, secret_file: " + whsec + "}\n" +
		"hosts:\n  rotating.example:\n    sign:\n      scheme: standard-webhooks\n      replace: true\n" +
		"      secrets: [{env: HOOKPACE_TEST_WHSEC}, {file: " + whsec + "}]\n" +
		"  github.example:\n    sign: {scheme: hmac-sha256, header: X-Hub-Signature-256, secret_env: HOOKPACE_TEST_HMAC}\n" +
		"  inherits.example: {rate: 5/s}\n"
	cfg, err := config.Parse("f.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	f, err := LoadFiles(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if f.AdminToken != "0123456789abcdef0123" || f.HandoffAuth != "gw:pa:ss" || f.RedisPassword != "from-file" {
		t.Errorf("token %q, hand-off %q, redis %q", f.AdminToken, f.HandoffAuth, f.RedisPassword)
	}
	if f.Signer(cfg.Defaults.Sign) == nil || f.Signer(cfg.Hosts["inherits.example"].Sign) != f.Signer(cfg.Defaults.Sign) {
		t.Error("defaults' signer missing or not shared by the host that inherits it")
	}
	h := http.Header{"Webhook-Signature": {"v1,app"}}
	f.Signer(cfg.Hosts["rotating.example"].Sign).Sign(h, "rotating.example", "msg_p5jXN8AQM9LWM0D4loKWxJek", []byte(`{"test": 2432232314}`), time.Unix(1614265330, 0))
	const v = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	if h.Get("Webhook-Signature") != v+" "+v {
		t.Errorf("rotation from env and file, replace: %v", h)
	}
	h = http.Header{}
	f.Signer(cfg.Hosts["github.example"].Sign).Sign(h, "github.example", "1", []byte("Hello, World!"), time.Unix(1, 0))
	if h.Get("X-Hub-Signature-256") != "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17" {
		t.Errorf("hmac-sha256 from env: %v", h)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"fleet: {redis: \"redis://h:6379\", redis_password_env: HOOKPACE_TEST_REDIS_PW}\n", "s3cret"},
		{"fleet: {redis: \"redis://:inurl@h:6379\"}\n", "inurl"},
		{"fleet: {cluster: [\"h:7000\"], redis_password_env: HOOKPACE_TEST_REDIS_PW}\n", "s3cret"},
		{"fleet: {sentinel: {master: m, addrs: [\"h:26379\"]}, redis_password_env: HOOKPACE_TEST_REDIS_PW}\n", "s3cret"},
	} {
		cfg, err := config.Parse("f.yaml", []byte(tc.yaml))
		if err != nil {
			t.Fatal(err)
		}
		if f, err := LoadFiles(cfg); err != nil || f.RedisPassword != tc.want {
			t.Errorf("%s: %v, password %q, want %q", tc.yaml, err, f.RedisPassword, tc.want)
		}
	}
}
