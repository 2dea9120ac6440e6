package sign

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// verifyV1a checks one "v1a,<sig>" of a webhook-signature value against
// pub with crypto/ed25519 alone, as a receiver would.
func verifyV1a(t *testing.T, pub ed25519.PublicKey, h http.Header, body []byte) int {
	t.Helper()
	msg := h.Get(HeaderID) + "." + h.Get(HeaderTimestamp) + "." + string(body)
	ok := 0
	for _, s := range strings.Fields(h.Get(HeaderSignature)) {
		v, sig, _ := strings.Cut(s, ",")
		if v != "v1a" {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(sig)
		if err != nil {
			t.Fatalf("signature %q: %v", s, err)
		}
		if ed25519.Verify(pub, []byte(msg), raw) {
			ok++
		}
	}
	return ok
}

func TestV1a(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	pub2, priv2, _ := ed25519.GenerateKey(rand.Reader)
	secret := []byte("0123456789abcdef0123")
	s, err := New(Options{Scheme: StandardWebhooksV1a, Keys: []ed25519.PrivateKey{priv, priv2}, Secrets: [][]byte{secret}})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":"invoice.paid"}`)
	h := http.Header{}
	s.Sign(h, "partner.example", "msg_1", body, time.Unix(1700000000, 0))
	if h.Get(HeaderTimestamp) != "1700000000" || h.Get(HeaderID) != "msg_1" {
		t.Fatalf("headers %v", h)
	}
	if n := verifyV1a(t, pub, h, body); n != 1 {
		t.Errorf("first key verifies %d signatures, want 1: %s", n, h.Get(HeaderSignature))
	}
	if n := verifyV1a(t, pub2, h, body); n != 1 {
		t.Errorf("second key (rotation) verifies %d, want 1", n)
	}
	if n := verifyV1a(t, pub, h, []byte(`{"type":"invoice.unpaid"}`)); n != 0 {
		t.Errorf("another body verifies")
	}
	// The v1 signature of the migration is there too, and is v1's.
	v1 := Signatures([][]byte{secret}, "msg_1", "1700000000", body)
	if !strings.HasSuffix(h.Get(HeaderSignature), " "+v1) || strings.Count(h.Get(HeaderSignature), " ") != 2 {
		t.Errorf("signature %q, want two v1a then %q", h.Get(HeaderSignature), v1)
	}

	if _, err := New(Options{Scheme: StandardWebhooksV1a}); err == nil {
		t.Error("v1a without a key accepted")
	}
	if _, err := New(Options{Scheme: StandardWebhooksV1a, Keys: []ed25519.PrivateKey{priv[:10]}}); err == nil {
		t.Error("a short key accepted")
	}
}

func TestLoadOrCreateKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sign", "ed25519.pem")
	k1, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v; want 0600", fi.Mode(), err)
	}
	if di, _ := os.Stat(filepath.Dir(path)); di.Mode().Perm() != 0o700 {
		t.Errorf("key directory mode %v, want 0700", di.Mode())
	}
	k2, err := LoadOrCreateKey(path)
	if err != nil || !k1.Equal(k2) {
		t.Fatalf("second load: a different key (%v)", err)
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 {
		t.Errorf("left %d files beside the key", len(ents))
	}
	pub := k1.Public().(ed25519.PublicKey)
	wpk := PublicKey(pub)
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(wpk, "whpk_"))
	if !strings.HasPrefix(wpk, "whpk_") || err != nil || len(raw) != 32 {
		t.Errorf("public key %q", wpk)
	}
	if back, err := ParsePublicKey(wpk); err != nil || !back.Equal(pub) {
		t.Errorf("ParsePublicKey: %v", err)
	}
}

func TestReadKeyForms(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, text string
		ok         bool
	}{
		{"seed", "whsk_" + base64.StdEncoding.EncodeToString(priv.Seed()) + "\n", true},
		{"full", "whsk_" + base64.StdEncoding.EncodeToString(priv), true},
		{"short", "whsk_" + base64.StdEncoding.EncodeToString(priv[:20]), false},
		{"mismatch", "whsk_" + base64.StdEncoding.EncodeToString(append(priv.Seed(), make([]byte, 32)...)), false},
		{"whsec", "whsec_" + base64.StdEncoding.EncodeToString(priv.Seed()), false},
		{"pem rsa", "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n", false},
	} {
		k, err := ReadKey(write(tc.name, tc.text))
		if (err == nil) != tc.ok || (tc.ok && !k.Equal(priv)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
