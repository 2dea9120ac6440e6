package server

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookpace/hookpace/config"
)

// credentials reads what each auth block names through credential's own
// options: a header's file is read, and each missing secret or
// certificate is an error that names its config field and line.
func TestCredentialsFromConfig(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	if err := os.WriteFile(key, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	src := "hosts:\n" +
		"  good.example:\n" +
		"    auth:\n" +
		"      headers:\n" +
		"        X-Api-Key: {file: " + key + "}\n" +
		"  bad.example:\n" +
		"    auth:\n" +
		"      mtls: {cert_file: " + missing + ".crt, key_file: " + missing + ".key}\n" +
		"      oauth2: {token_url: \"https://auth.example/token\", client_id: id, client_secret_file: " + missing + "}\n" +
		"      headers:\n" +
		"        X-Key: {env: HOOKPACE_TEST_NEVER_SET_4711}\n"
	cfg, err := config.Parse("c.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	creds, err := credentials(cfg)
	if err == nil {
		t.Fatal("no error for the missing secrets")
	}
	for _, want := range []string{"c.yaml:8: ", "mtls", "c.yaml:9: ", "oauth2", "c.yaml:11: ", "HOOKPACE_TEST_NEVER_SET_4711 is not set"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	h := http.Header{}
	if err := creds[cfg.Hosts["good.example"].Auth].Apply(context.Background(), h); err != nil || h.Get("X-Api-Key") != "s3cret" {
		t.Fatalf("good.example's header: %q, %v", h.Get("X-Api-Key"), err)
	}
}
