package mitm

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"software.sslmate.com/src/go-pkcs12"
)

func mustNames(t *testing.T, entries ...string) Names {
	t.Helper()
	n, err := ParseNames(entries)
	if err != nil {
		t.Fatalf("ParseNames(%q): %v", entries, err)
	}
	return n
}

func TestParseNamesAndCovers(t *testing.T) {
	n := mustNames(t, "API.Partner.Example.", "*.slack.example", "hooks.other.example:8443", "10.0.0.5:80", "[2001:db8::1]:443", "192.168.0.0/16", "api.partner.example")
	if got, want := n.String(), "*.slack.example, api.partner.example, hooks.other.example, 10.0.0.5, 192.168.0.0/16, 2001:db8::1"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	for host, want := range map[string]bool{
		"api.partner.example":      true,
		"API.partner.example:443":  true,
		"x.api.partner.example":    true, // RFC 5280: a name permits the names below it
		"partner.example":          false,
		"evil-api.partner.example": false,
		"a.slack.example":          true,
		"a.b.slack.example":        true,
		"slack.example":            false, // "*." is below only
		"10.0.0.5":                 true,
		"10.0.0.6":                 false,
		"192.168.3.4":              true,
		"[2001:db8::1]":            true,
		"2001:db8::2":              false,
		"bank.example":             false,
	} {
		if got := n.Covers(host); got != want {
			t.Errorf("Covers(%q) = %v, want %v", host, got, want)
		}
	}
	if _, err := ParseNames([]string{"bad_name!"}); err == nil {
		t.Error("ParseNames accepted a malformed name")
	}
}

func TestNamesMissing(t *testing.T) {
	have := mustNames(t, "partner.example", "*.slack.example", "10.0.0.0/8")
	for _, tc := range []struct{ want, missing string }{
		{"partner.example", ""},
		{"api.partner.example", ""},
		{"*.partner.example", ""},
		{"*.a.slack.example", ""},
		{"slack.example", "slack.example"},
		{"*.example", "*.example"},
		{"10.1.2.3", ""},
		{"10.0.0.0/7", "10.0.0.0/7"},
		{"11.0.0.1", "11.0.0.1"},
	} {
		if got := have.Missing(mustNames(t, tc.want)).String(); got != tc.missing {
			t.Errorf("Missing(%s) = %q, want %q", tc.want, got, tc.missing)
		}
	}
}

// verify checks leaf against ca alone with crypto/x509.
func verify(ca *CA, leaf *x509.Certificate, name string) error {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: name})
	return err
}

// opensslVerify runs openssl verify on leaf with ca as the only trust
// anchor and returns its output and whether it verified.
func opensslVerify(t *testing.T, ca *CA, leaf *x509.Certificate) (string, bool) {
	t.Helper()
	dir := t.TempDir()
	caFile, leafFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "leaf.pem")
	os.WriteFile(caFile, ca.certPEM, 0o644)
	os.WriteFile(leafFile, pemCert(leaf.Raw), 0o644)
	out, err := exec.Command("openssl", "verify", "-purpose", "sslserver", "-CAfile", caFile, leafFile).CombinedOutput()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("openssl verify: %v (is openssl installed?)", err)
	}
	return string(out), err == nil
}

// TestNameConstraintsHold: hookpace's own CA carries critical name
// constraints that crypto/x509 and OpenSSL both enforce: a leaf it signs
// for a name (DNS or IP) outside them fails verification even though the
// signature is good, and the CA itself refuses to issue one.
func TestNameConstraintsHold(t *testing.T) {
	ca, outcome, err := Ensure(filepath.Join(t.TempDir(), "mitm"), mustNames(t, "partner.example", "10.0.0.5"), 10)
	if err != nil || outcome != Created {
		t.Fatalf("Ensure: %v, %v", outcome, err)
	}
	if !ca.cert.PermittedDNSDomainsCritical {
		t.Fatal("name constraints are not critical")
	}
	out, err := exec.Command("openssl", "x509", "-noout", "-text", "-in", writeTemp(t, ca.certPEM)).CombinedOutput()
	if err != nil {
		t.Fatalf("openssl x509: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "X509v3 Name Constraints: critical") || !strings.Contains(string(out), "DNS:partner.example") {
		t.Fatalf("openssl x509 -text shows no critical name constraints for partner.example:\n%s", out)
	}
	for _, tc := range []struct {
		host string
		ok   bool
	}{
		{"partner.example", true},
		{"10.0.0.5", true},
		{"bank.example", false}, // a DNS leaf outside
		{"10.0.0.6", false},     // an IP leaf outside
		{"192.0.2.1", false},
	} {
		key, ip, err := normalizeHost(tc.host)
		if err != nil {
			t.Fatal(err)
		}
		// generate signs whatever it is given: what a leaked key could do.
		cert, err := ca.generate(key, ip)
		if err != nil {
			t.Fatalf("generate(%s): %v", tc.host, err)
		}
		goErr := verify(ca, cert.Leaf, tc.host)
		sslOut, sslOK := opensslVerify(t, ca, cert.Leaf)
		if (goErr == nil) != tc.ok || sslOK != tc.ok {
			t.Errorf("%s: crypto/x509 says %v, openssl says %q; want verified=%v", tc.host, goErr, sslOut, tc.ok)
		}
		if !tc.ok && !strings.Contains(sslOut, "subtree violation") {
			t.Errorf("%s: openssl failed for another reason than the name constraints: %s", tc.host, sslOut)
		}
		if _, err := ca.Certificate(tc.host); (err == nil) != tc.ok {
			t.Errorf("Certificate(%s): %v; want issued=%v", tc.host, err, tc.ok)
		}
	}
}

// TestDNSOnlyCAExcludesIPs: constraints are per name type, so a CA with
// only DNS names must exclude every IP, and one with only IPs every name.
func TestDNSOnlyCAExcludesIPs(t *testing.T) {
	for _, tc := range []struct{ names, outside string }{
		{"partner.example", "127.0.0.1"},
		{"127.0.0.1", "partner.example"},
	} {
		ca, _, err := Ensure(filepath.Join(t.TempDir(), "mitm"), mustNames(t, tc.names), 10)
		if err != nil {
			t.Fatal(err)
		}
		key, ip, _ := normalizeHost(tc.outside)
		cert, err := ca.generate(key, ip)
		if err != nil {
			t.Fatal(err)
		}
		if err := verify(ca, cert.Leaf, tc.outside); err == nil {
			t.Errorf("CA for %s: a leaf for %s verified with crypto/x509", tc.names, tc.outside)
		}
		if out, ok := opensslVerify(t, ca, cert.Leaf); ok {
			t.Errorf("CA for %s: a leaf for %s verified with openssl: %s", tc.names, tc.outside, out)
		}
		// Java parses the CA too (it refuses a certificate whose
		// constraints hold an empty e-mail address or URI).
		if out, err := exec.Command("keytool", "-printcert", "-file", writeTemp(t, ca.certPEM)).CombinedOutput(); err != nil {
			t.Errorf("CA for %s: keytool -printcert: %v\n%s", tc.names, err, out)
		}
	}
}

func writeTemp(t *testing.T, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f.pem")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestEnsureKeepsAndReissues: a second Ensure loads the same CA; one for a
// name the CA does not cover re-issues the certificate with the same key
// and subject, so that a client still trusting the old certificate keeps
// verifying the old names, and needs the new one for the new name.
func TestEnsureKeepsAndReissues(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mitm")
	first, outcome, err := Ensure(dir, mustNames(t, "a.example"), 10)
	if err != nil || outcome != Created {
		t.Fatalf("Ensure: %v, %v", outcome, err)
	}
	certPath, keyPath := OwnPaths(dir)
	for p, want := range map[string]os.FileMode{dir: 0o700 | os.ModeDir, keyPath: 0o600, certPath: 0o644} {
		if fi, err := os.Stat(p); err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v (%v), want %v", p, fi.Mode(), err, want)
		}
	}
	again, outcome, err := Ensure(dir, mustNames(t, "a.example"), 10)
	if err != nil || outcome != Loaded || !bytes.Equal(again.cert.Raw, first.cert.Raw) {
		t.Fatalf("second Ensure: %v, %v; same certificate %v", outcome, err, bytes.Equal(again.cert.Raw, first.cert.Raw))
	}
	grown, outcome, err := Ensure(dir, mustNames(t, "a.example", "b.example"), 10)
	if err != nil || outcome != Reissued {
		t.Fatalf("Ensure with a new name: %v, %v", outcome, err)
	}
	if !grown.key.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(first.key.Public()) || grown.cert.Subject.String() != first.cert.Subject.String() {
		t.Fatal("the re-issued CA has another key or subject")
	}
	for _, tc := range []struct {
		host             string
		oldOK, newTrusts bool
	}{{"a.example", true, true}, {"b.example", false, true}} {
		leaf, err := grown.Certificate(tc.host)
		if err != nil {
			t.Fatal(err)
		}
		if err := verify(first, leaf.Leaf, tc.host); (err == nil) != tc.oldOK {
			t.Errorf("%s with the old trust: %v, want verified=%v", tc.host, err, tc.oldOK)
		}
		if err := verify(grown, leaf.Leaf, tc.host); err != nil {
			t.Errorf("%s with the new trust: %v", tc.host, err)
		}
	}
}

func TestWriteTrust(t *testing.T) {
	ca, _, err := Ensure(filepath.Join(t.TempDir(), "mitm"), mustNames(t, "partner.example"), 10)
	if err != nil {
		t.Fatal(err)
	}
	roots, from := SystemRoots()
	if roots == nil {
		t.Fatal("no system roots found (is ca-certificates installed?)")
	}
	dir := filepath.Join(t.TempDir(), "trust")
	// Roots read back from an earlier bundle hold the CA already.
	if err := WriteTrust(dir, ca, append(roots, ca.certPEM...)); err != nil {
		t.Fatal(err)
	}
	bundle, err := os.ReadFile(filepath.Join(dir, TrustBundle))
	if err != nil {
		t.Fatal(err)
	}
	var n, cas int
	for rest := bundle; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		n++
		if bytes.Equal(b.Bytes, ca.cert.Raw) {
			cas++
		}
	}
	if cas != 1 || n < 10 {
		t.Errorf("bundle holds %d certificates, the CA %d times; want the roots of %s and the CA once", n, cas, from)
	}
	p12, err := os.ReadFile(filepath.Join(dir, TrustStore))
	if err != nil {
		t.Fatal(err)
	}
	certs, err := pkcs12.DecodeTrustStore(p12, TrustPassword)
	if err != nil || len(certs) != n {
		t.Fatalf("trust store: %d certificates (%v), want %d", len(certs), err, n)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, TrustCert)); !bytes.Equal(got, ca.certPEM) {
		t.Error("ca.crt is not the CA certificate")
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), "key") {
			t.Errorf("trust directory holds %s", e.Name())
		}
	}
}

func TestUncovered(t *testing.T) {
	ca, _, err := Ensure(filepath.Join(t.TempDir(), "mitm"), mustNames(t, "partner.example", "*.slack.example"), 10)
	if err != nil {
		t.Fatal(err)
	}
	got := ca.Uncovered([]string{"partner.example:443", "*.slack.example", "a.slack.example", "*.example", "10.0.0.1", "bad host"})
	if want := []string{"*.example", "10.0.0.1", "bad host"}; !slices.Equal(got, want) {
		t.Errorf("Uncovered = %q, want %q", got, want)
	}
}

// TestInitConstrainedCA: an operator's CA made with names (ca init
// --hosts) is name-constrained as hookpace's own is.
func TestInitConstrainedCA(t *testing.T) {
	certPath, keyPath, err := InitConstrainedCA(filepath.Join(t.TempDir(), "ca"), mustNames(t, "partner.example"))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := LoadCA(certPath, keyPath, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !ca.Covers("partner.example") || ca.Covers("bank.example") || ca.Covers("10.0.0.1") {
		t.Error("the CA does not vouch for exactly partner.example")
	}
	if _, _, err := InitConstrainedCA(filepath.Join(t.TempDir(), "ca"), Names{}); err == nil {
		t.Error("a CA with no names was made")
	}
}
