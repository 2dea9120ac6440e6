package mitm

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// newTestCA creates a CA with InitCA in a temporary directory and loads it.
func newTestCA(t *testing.T, cacheSize int) *CA {
	t.Helper()
	certPath, keyPath, err := InitCA(filepath.Join(t.TempDir(), "ca"))
	if err != nil {
		t.Fatalf("InitCA: %v", err)
	}
	ca, err := LoadCA(certPath, keyPath, cacheSize)
	if err != nil {
		t.Fatalf("LoadCA: %v", err)
	}
	return ca
}

// writePair self-signs tmpl with a fresh P-256 key and writes the pair
// into dir as cert.pem and key.pem.
func writePair(t *testing.T, dir string, tmpl *x509.Certificate) (certPath, keyPath string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	write := func(p, typ string, b []byte) {
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(certPath, "CERTIFICATE", der)
	write(keyPath, "PRIVATE KEY", keyDER)
	return certPath, keyPath
}

func caTemplate(notBefore, notAfter time.Time) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test CA"},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestInitCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mitm")
	certPath, keyPath, err := InitCA(dir)
	if err != nil {
		t.Fatalf("InitCA: %v", err)
	}
	if certPath != filepath.Join(dir, "ca.crt") || keyPath != filepath.Join(dir, "ca.key") {
		t.Errorf("paths = %s, %s", certPath, keyPath)
	}
	for p, want := range map[string]os.FileMode{dir: 0o700, certPath: 0o644, keyPath: 0o600} {
		if got := mode(t, p); got != want {
			t.Errorf("mode of %s = %o, want %o", p, got, want)
		}
	}

	ca, err := LoadCA(certPath, keyPath, 0)
	if err != nil {
		t.Fatalf("LoadCA: %v", err)
	}
	c := ca.cert
	if !strings.HasPrefix(c.Subject.CommonName, "hookpace MITM CA (") {
		t.Errorf("CommonName = %q", c.Subject.CommonName)
	}
	if !c.IsCA || c.MaxPathLen != 0 || !c.MaxPathLenZero || c.KeyUsage != x509.KeyUsageCertSign|x509.KeyUsageCRLSign {
		t.Errorf("IsCA %v MaxPathLen %d zero %v KeyUsage %v", c.IsCA, c.MaxPathLen, c.MaxPathLenZero, c.KeyUsage)
	}
	if years := c.NotAfter.Sub(c.NotBefore).Hours() / 24 / 365; years < 9.9 || years > 10.1 {
		t.Errorf("validity %.2f years, want 10", years)
	}
	if bl := c.SerialNumber.BitLen(); bl == 0 || bl > 128 {
		t.Errorf("serial has %d bits", bl)
	}
	if k, ok := ca.key.(*ecdsa.PrivateKey); !ok || k.Curve != elliptic.P256() {
		t.Errorf("key is %T, want ECDSA P-256", ca.key)
	}
	if ca.cache.size != defaultCacheSize {
		t.Errorf("cache size %d, want default %d", ca.cache.size, defaultCacheSize)
	}
	keyPEM, _ := os.ReadFile(keyPath)
	if b, _ := pem.Decode(keyPEM); b == nil || b.Type != "PRIVATE KEY" {
		t.Errorf("key file is not a PKCS#8 PEM block")
	}
	if certPEM, _ := os.ReadFile(certPath); !bytes.Equal(ca.CertPEM(), certPEM) {
		t.Errorf("CertPEM differs from %s", certPath)
	}

	// A second InitCA refuses, and leaves the files alone.
	_, _, err = InitCA(dir)
	if err == nil || !strings.Contains(err.Error(), "refusing to overwrite") {
		t.Fatalf("second InitCA: err = %v, want refusal", err)
	}
	if again, _ := os.ReadFile(keyPath); !bytes.Equal(again, keyPEM) {
		t.Errorf("key file changed")
	}
	// Only the key left behind is enough to refuse.
	if err := os.Remove(certPath); err != nil {
		t.Fatal(err)
	}
	if _, _, err := InitCA(dir); err == nil || !strings.Contains(err.Error(), keyPath) {
		t.Errorf("InitCA with existing key: err = %v, want refusal naming %s", err, keyPath)
	}
}

func TestLoadCAErrors(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	certA, _, err := InitCA(dirA)
	if err != nil {
		t.Fatal(err)
	}
	_, keyB, err := InitCA(dirB)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()

	notCA := caTemplate(now.Add(-time.Hour), now.Add(time.Hour))
	notCA.IsCA = false
	notCACert, notCAKey := writePair(t, t.TempDir(), notCA)
	expiredCert, expiredKey := writePair(t, t.TempDir(), caTemplate(now.Add(-48*time.Hour), now.Add(-24*time.Hour)))
	futureCert, futureKey := writePair(t, t.TempDir(), caTemplate(now.Add(24*time.Hour), now.Add(48*time.Hour)))
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing.crt")

	tests := []struct {
		name, cert, key string
		want            []string // substrings of the error
	}{
		{"mismatched key", certA, keyB, []string{"does not match", keyB, certA}},
		{"not a CA", notCACert, notCAKey, []string{"not a CA", notCACert}},
		{"expired", expiredCert, expiredKey, []string{"expired", expiredCert}},
		{"not yet valid", futureCert, futureKey, []string{"not valid until", futureCert}},
		{"garbage cert", garbage, keyB, []string{"no PEM CERTIFICATE", garbage}},
		{"garbage key", certA, garbage, []string{"no PEM private key", garbage}},
		{"missing cert", missing, keyB, []string{missing}},
		{"key as cert", keyB, keyB, []string{"no PEM CERTIFICATE", keyB}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadCA(tt.cert, tt.key, 10)
			if err == nil {
				t.Fatal("LoadCA succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
