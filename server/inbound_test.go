package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookpace/hookpace/config"
)

// TestInboundVerifySecrets: LoadFiles (check-config, start, reload) reads
// each inbound route's verify secret, and an unreadable or malformed one
// fails it naming the field, never showing the secret.
func TestInboundVerifySecrets(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	bad := filepath.Join(dir, "bad")
	os.WriteFile(good, []byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n"), 0o600)
	os.WriteFile(bad, []byte("not-a-whsec-secret!!\n"), 0o600)
	parse := func(file string) *config.Config {
		c, err := config.Parse("c.yaml", []byte("spool: {dir: "+dir+"}\ninbound:\n  - listen: 127.0.0.1:0\n    to: http://127.0.0.1:3000\n"+
			"    verify: {scheme: standard-webhooks, secret_file: "+file+"}\n"))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := parse(good)
	f, err := LoadFiles(c)
	if err != nil || f.verifiers[c.Inbound[0].Verify] == nil {
		t.Fatalf("good secret: %v %v", err, f)
	}
	for _, file := range []string{bad, filepath.Join(dir, "missing")} {
		_, err := LoadFiles(parse(file))
		if err == nil || !strings.Contains(err.Error(), "c.yaml:5: inbound[0].verify.secret_file:") || strings.Contains(err.Error(), "not-a-whsec") {
			t.Errorf("%s: %v", filepath.Base(file), err)
		}
	}
}
