package server

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/sign"
)

// v1a signs with hookpace's own key, created beside the spool once, or
// with the operator's key file; a v1 secret beside it adds v1.
func TestV1aSigners(t *testing.T) {
	dir := t.TempDir()
	_, opKey, _ := ed25519.GenerateKey(rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(opKey)
	keyFile := filepath.Join(dir, "op.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	whsec := filepath.Join(dir, "whsec")
	if err := os.WriteFile(whsec, []byte(testWhsec), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := "spool: {dir: " + filepath.Join(dir, "spool") + "}\n" +
		"hosts:\n  own.example:\n    sign: {scheme: standard-webhooks-v1a}\n" +
		"  op.example:\n    sign: {scheme: standard-webhooks-v1a, key_file: " + keyFile + ", secret_file: " + whsec + "}\n" +
		"  missing.example:\n    sign: {scheme: standard-webhooks-v1a, key_file: " + filepath.Join(dir, "nope.pem") + "}\n"
	cfg, err := config.Parse("f.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFiles(cfg); err == nil || !strings.Contains(err.Error(), `f.yaml:8: hosts["missing.example"].sign.key_file:`) {
		t.Fatalf("a missing key file: %v", err)
	}
	delete(cfg.Hosts, "missing.example")
	f, err := LoadFiles(cfg)
	if err != nil {
		t.Fatal(err)
	}
	own, err := SigningKeys(cfg, cfg.Hosts["own.example"].Sign)
	if err != nil || len(own) != 1 {
		t.Fatalf("own key: %v", err)
	}
	if fi, err := os.Stat(cfg.SignKeyPath()); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("own key file: %v %v", fi, err)
	}
	body := []byte(`{"a":1}`)
	for host, pub := range map[string]ed25519.PublicKey{
		"own.example": sign.HostKey(own[0], "own.example").Public().(ed25519.PublicKey), // per host by default
		"op.example":  opKey.Public().(ed25519.PublicKey),
	} {
		h := http.Header{}
		f.Signer(cfg.Hosts[host].Sign).Sign(h, host, "msg_1", body, time.Unix(1700000000, 0))
		sigs := strings.Fields(h.Get("Webhook-Signature"))
		v, sig, _ := strings.Cut(sigs[0], ",")
		raw, _ := base64.StdEncoding.DecodeString(sig)
		if v != "v1a" || !ed25519.Verify(pub, []byte("msg_1.1700000000."+string(body)), raw) {
			t.Errorf("%s: %v does not verify", host, sigs)
		}
		if wantV1 := host == "op.example"; (len(sigs) == 2 && strings.HasPrefix(sigs[1], "v1,")) != wantV1 {
			t.Errorf("%s: signatures %v, v1 beside: %v", host, sigs, wantV1)
		}
	}
}
