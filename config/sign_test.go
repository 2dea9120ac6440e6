package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookpace/hookpace/sign"
)

const testWhsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func writeSecret(t *testing.T, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(s+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSignConfig(t *testing.T) {
	file := writeSecret(t, testWhsec)
	t.Setenv("HOOKPACE_TEST_WHSEC", testWhsec)
	t.Setenv("HOOKPACE_TEST_HMAC", "It's a Secret to Everybody")
	c := mustParse(t, `
defaults:
  sign:
    scheme: standard-webhooks
    secret_file: `+file+`
hosts:
  rotating.example:
    sign:
      scheme: standard-webhooks
      replace: true
      secrets:
        - env: HOOKPACE_TEST_WHSEC
        - file: `+file+`
  github.example:
    sign: {scheme: hmac-sha256, header: X-Hub-Signature-256, secret_env: HOOKPACE_TEST_HMAC}
  plain.example:
    sign: {scheme: none}
  inherits.example:
    rate: 5/s
`)
	if s := c.Defaults.Sign; s == nil || s.Scheme != sign.StandardWebhooks || s.Replace || len(s.Secrets) != 1 ||
		s.Secrets[0] != (Secret{Kind: "file", Name: file, Field: "defaults.sign.secret_file", Line: 5}) {
		t.Fatalf("defaults.sign = %+v", s)
	}
	if c.Hosts["inherits.example"].Sign != c.Defaults.Sign {
		t.Error("a host without sign does not inherit defaults.sign")
	}
	if c.Hosts["plain.example"].Sign != nil {
		t.Error("scheme none still signs")
	}
	rot := c.Hosts["rotating.example"].Sign
	if !rot.Replace || len(rot.Secrets) != 2 || rot.Secrets[0].String() != "env HOOKPACE_TEST_WHSEC" ||
		rot.Secrets[1].Field != `hosts["rotating.example"].sign.secrets[1].file` {
		t.Errorf("rotation from env and file, replace: %+v", rot)
	}
	if gh := c.Hosts["github.example"].Sign; gh.Header != "X-Hub-Signature-256" || gh.Secrets[0].String() != "env HOOKPACE_TEST_HMAC" {
		t.Errorf("hmac-sha256 from env: %+v", gh)
	}
}

func TestSignConfigErrors(t *testing.T) {
	file := writeSecret(t, testWhsec)
	for _, tt := range []struct{ name, yaml, want string }{
		{"no scheme", "defaults:\n  sign:\n    secret_file: " + file + "\n", "config.yaml:3: defaults.sign.scheme: required"},
		{"bad scheme", "defaults:\n  sign:\n    scheme: rsa\n    secret_file: " + file + "\n", "config.yaml:3: defaults.sign.scheme:"},
		{"no secret", "defaults:\n  sign:\n    scheme: standard-webhooks\n", "config.yaml:3: defaults.sign: needs a secret"},
		{"two sources", "defaults:\n  sign:\n    scheme: standard-webhooks\n    secret_file: " + file + "\n    secret_env: X\n", "set one of secret_file, secret_env and secrets"},
		{"three secrets", "defaults:\n  sign:\n    scheme: standard-webhooks\n    secrets: [{file: " + file + "}, {file: " + file + "}, {file: " + file + "}]\n", "config.yaml:4: defaults.sign.secrets: want a list of 1 or 2"},
		{"secret both", "defaults:\n  sign:\n    scheme: standard-webhooks\n    secrets:\n      - {file: " + file + ", env: X}\n", "config.yaml:5: defaults.sign.secrets[0]: want exactly one of file or env"},
		{"unknown in secret", "defaults:\n  sign:\n    scheme: standard-webhooks\n    secrets:\n      - {path: " + file + "}\n", `config.yaml:5: unknown field "path" in defaults.sign.secrets[0]`},
		{"unknown field", "hosts:\n  a.example:\n    sign:\n      scheme: standard-webhooks\n      secret_file: " + file + "\n      algorithm: x\n", `config.yaml:6: unknown field "algorithm" in hosts["a.example"].sign`},
		{"hmac no header", "defaults:\n  sign:\n    scheme: hmac-sha256\n    secret_file: " + file + "\n", "config.yaml:3: defaults.sign.header: required with scheme hmac-sha256"},
		{"hmac rotation", "defaults:\n  sign:\n    scheme: hmac-sha256\n    header: X-Sig\n    secrets:\n      - file: " + file + "\n      - file: " + file + "\n", "config.yaml:7: defaults.sign.secrets: hmac-sha256 takes one secret"},
		{"sw header", "defaults:\n  sign:\n    scheme: standard-webhooks\n    header: X-Sig\n    secret_file: " + file + "\n", "config.yaml:4: defaults.sign.header: only for scheme hmac-sha256"},
		{"bad header", "defaults:\n  sign:\n    scheme: hmac-sha256\n    header: 'X Sig'\n    secret_file: " + file + "\n", "config.yaml:4: defaults.sign.header:"},
		{"replace type", "defaults:\n  sign:\n    scheme: standard-webhooks\n    replace: yes please\n    secret_file: " + file + "\n", "config.yaml:4: defaults.sign.replace: want true or false"},
		{"not a mapping", "defaults:\n  sign: standard-webhooks\n", "config.yaml:2: defaults.sign: want a mapping"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("config.yaml", []byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v\nwant an error containing %q", err, tt.want)
			}
		})
	}
}
