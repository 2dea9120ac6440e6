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
	} {
		cfg, err := config.Parse("f.yaml", []byte(tc.yaml))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		files, err := LoadFiles(cfg)
		if len(tc.want) == 0 {
			if err != nil || files.Roots == nil || cfg.MITM.Enabled() != (files.CA != nil) {
				t.Errorf("%s: %v (roots %v, ca %v)", tc.name, err, files.Roots != nil, files.CA != nil)
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
