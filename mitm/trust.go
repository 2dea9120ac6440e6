package mitm

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"software.sslmate.com/src/go-pkcs12"
)

// The public trust files, in a directory of their own that apps can mount
// read-only: the CA's private key is never there.
const (
	TrustCert     = "ca.crt"         // the CA certificate (PEM)
	TrustBundle   = "bundle.pem"     // the system roots plus the CA (PEM)
	TrustStore    = "truststore.p12" // the same as a PKCS#12 trust store, for Java
	TrustPassword = "changeit"       // the trust store's password, the JDK's own convention
	TrustPHPDir   = "php"            // a PHP_INI_SCAN_DIR directory: PHP reads no CA variable
	TrustPHPIni   = "hookpace.ini"   // in TrustPHPDir: curl.cainfo and openssl.cafile
)

// phpIni points PHP's curl extension and its https:// streams at the
// bundle SSL_CERT_FILE names (PHP expands ${VAR} in ini values): PHP
// reads neither SSL_CERT_FILE nor CURL_CA_BUNDLE itself. With
// SSL_CERT_FILE unset both settings are empty, PHP's own default.
const phpIni = `; hookpace: PHP's curl and https:// streams trust the bundle SSL_CERT_FILE names.
curl.cainfo = "${SSL_CERT_FILE}"
openssl.cafile = "${SSL_CERT_FILE}"
`

// systemBundles are where Linux distributions keep their roots, in the
// order crypto/x509 tries them.
var systemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",                // Debian, Ubuntu, Alpine, distroless
	"/etc/pki/tls/certs/ca-bundle.crt",                  // Fedora, RHEL 6
	"/etc/ssl/ca-bundle.pem",                            // openSUSE
	"/etc/pki/tls/cacert.pem",                           // OpenELEC
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // CentOS, RHEL 7
	"/etc/ssl/cert.pem",                                 // Alpine
}

// SystemRoots reads the system's root certificates as PEM (SSL_CERT_FILE
// first, as crypto/x509 does), and says which file they came from; none
// found is not an error: the bundle then holds the CA alone.
func SystemRoots() (pemData []byte, from string) {
	files := systemBundles
	if f := os.Getenv("SSL_CERT_FILE"); f != "" {
		files = append([]string{f}, files...)
	}
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte("-----BEGIN CERTIFICATE-----")) {
			return b, f
		}
	}
	return nil, ""
}

// WriteTrust writes ca's public trust files into dir (created 0755): the
// CA certificate, a PEM bundle of roots plus the CA, and a PKCS#12 trust
// store of the same certificates. Each file is replaced atomically, so an
// app reading one mid-write sees the old or the new. A root that appears
// twice (roots read from an earlier bundle) is written once. With no CA
// (nothing is intercepted) the bundle and store hold the roots alone, so
// that apps pointed at them keep working, and there is no ca.crt. The
// php/ directory holds an ini file for PHP_INI_SCAN_DIR.
func WriteTrust(dir string, ca *CA, roots []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("mitm: create trust directory %q: %w", dir, err)
	}
	var certs []*x509.Certificate
	seen := map[string]bool{}
	var bundle bytes.Buffer
	add := func(c *x509.Certificate) {
		if seen[string(c.Raw)] {
			return
		}
		seen[string(c.Raw)] = true
		certs = append(certs, c)
		if c.Subject.CommonName != "" {
			fmt.Fprintf(&bundle, "# %s\n", c.Subject.CommonName)
		}
		pem.Encode(&bundle, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	if ca != nil {
		add(ca.cert)
	}
	for rest := roots; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil && b.Type == "CERTIFICATE" {
			add(c)
		}
	}
	store, err := pkcs12.Modern.EncodeTrustStore(certs, TrustPassword)
	if err != nil {
		return fmt.Errorf("mitm: encode trust store: %w", err)
	}
	if err := replaceFile(filepath.Join(dir, TrustBundle), bundle.Bytes(), 0o644); err != nil {
		return err
	}
	if err := replaceFile(filepath.Join(dir, TrustStore), store, 0o644); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, TrustPHPDir), 0o755); err != nil {
		return fmt.Errorf("mitm: create the PHP trust directory: %w", err)
	}
	if err := replaceFile(filepath.Join(dir, TrustPHPDir, TrustPHPIni), []byte(phpIni), 0o644); err != nil {
		return err
	}
	certPath := filepath.Join(dir, TrustCert)
	if ca != nil {
		return replaceFile(certPath, ca.certPEM, 0o644)
	}
	if err := os.Remove(certPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("mitm: remove the old CA certificate: %w", err)
	}
	return nil
}
