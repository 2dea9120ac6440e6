package config

import (
	"strings"
	"testing"
)

// TestPlainTokenURLsNamed: an http:// token_url is named with its field
// and line, once for defaults (which hosts without their own auth share)
// and once per host with its own; https:// ones are not.
func TestPlainTokenURLsNamed(t *testing.T) {
	c := mustParse(t, `defaults:
  auth:
    oauth2:
      token_url: http://auth.example/token
      client_id: x
      client_secret_env: S
hosts:
  inherits.example: {rate: 1/s}
  own.example:
    auth:
      oauth2:
        client_id: y
        client_secret_env: S
        token_url: "HTTP://own-auth.example/token"
  safe.example:
    auth:
      oauth2: {token_url: "https://auth.example/token", client_id: z, client_secret_env: S}
`)
	got := c.PlainTokenURLs()
	want := []string{"line 4: defaults.auth.oauth2.token_url is http://", `line 14: hosts["own.example"].auth.oauth2.token_url is http://`}
	if len(got) != len(want) {
		t.Fatalf("PlainTokenURLs = %q, want %d", got, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) || !strings.Contains(got[i], "client secret") {
			t.Errorf("warning %d = %q, want it to start %q and name the client secret", i, got[i], w)
		}
	}
}
