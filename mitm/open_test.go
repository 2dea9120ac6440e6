package mitm

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenWorldCA: the open-world CA vouches for any public DNS name and,
// under critical name constraints that crypto/x509 and OpenSSL both
// enforce, for no IP address and no cluster-internal name: a leaf a
// leaked key signs for those fails verification, and the CA itself never
// mints one.
func TestOpenWorldCA(t *testing.T) {
	want, err := OpenNames([]string{"*.corp.example", "Vault.Example."})
	if err != nil {
		t.Fatal(err)
	}
	ca, outcome, err := Ensure(filepath.Join(t.TempDir(), "mitm"), want, 10)
	if err != nil || outcome != Created {
		t.Fatalf("Ensure: %v, %v", outcome, err)
	}
	out, err := exec.Command("openssl", "x509", "-noout", "-text", "-in", writeTemp(t, ca.certPEM)).CombinedOutput()
	if err != nil {
		t.Fatalf("openssl x509: %v\n%s", err, out)
	}
	text := string(out)
	for _, s := range []string{"X509v3 Name Constraints: critical", "Excluded:", "DNS:cluster.local", "DNS:svc",
		"DNS:internal", "DNS:local", "DNS:corp.example", "DNS:vault.example", "IP:0.0.0.0/0.0.0.0", "IP:0:0:0:0:0:0:0:0/0:0:0:0:0:0:0:0"} {
		if !strings.Contains(text, s) {
			t.Errorf("openssl x509 -text lacks %q:\n%s", s, text)
		}
	}
	if strings.Contains(text, "Permitted:") {
		t.Errorf("the open-world CA names permitted subtrees:\n%s", text)
	}
	for _, tc := range []struct {
		host string
		ok   bool
	}{
		{"p1.partner.test", true},
		{"api.stripe.com", true},
		{"hooks.partner.example", true},
		{"x.svc.cluster.local", false},
		{"kubernetes.default.svc", false},
		{"metadata.google.internal", false},
		{"printer.local", false},
		{"a.corp.example", false},
		{"vault.example", false},
		{"10.0.0.1", false},
		{"127.0.0.1", false},
		{"169.254.169.254", false},
		{"2001:db8::1", false},
		{"::1", false},
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
		if !tc.ok && !strings.Contains(sslOut, "violation") {
			t.Errorf("%s: openssl failed for another reason than the name constraints: %s", tc.host, sslOut)
		}
		if _, err := ca.Certificate(tc.host); (err == nil) != tc.ok {
			t.Errorf("Certificate(%s): %v; want issued=%v", tc.host, err, tc.ok)
		}
		if ca.Covers(tc.host) != tc.ok {
			t.Errorf("Covers(%s) = %v, want %v", tc.host, !tc.ok, tc.ok)
		}
	}
	if out, err := exec.Command("keytool", "-printcert", "-file", writeTemp(t, ca.certPEM)).CombinedOutput(); err != nil {
		t.Errorf("keytool -printcert: %v\n%s", err, out)
	}
	if got := ca.Uncovered([]string{"p1.partner.test", "10.0.0.1", "db.svc.cluster.local", "*.corp.example"}); strings.Join(got, ",") != "10.0.0.1,db.svc.cluster.local,*.corp.example" {
		t.Errorf("Uncovered = %q", got)
	}
}

// TestOpenWorldCAStable: the open-world CA's certificate keeps its bytes
// across Ensure calls (whatever hosts the config names), and is re-issued
// only when its exclusions change or a listed-hosts CA is wanted instead.
func TestOpenWorldCAStable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mitm")
	open, _ := OpenNames(nil)
	first, _, err := Ensure(dir, open, 10)
	if err != nil {
		t.Fatal(err)
	}
	certPath, _ := OwnPaths(dir)
	before, _ := os.ReadFile(certPath)
	for range 3 {
		again, outcome, err := Ensure(dir, open, 10)
		if err != nil || outcome != Loaded || !bytes.Equal(again.CertPEM(), first.CertPEM()) {
			t.Fatalf("Ensure again: %v, %v", outcome, err)
		}
	}
	if after, _ := os.ReadFile(certPath); !bytes.Equal(before, after) {
		t.Fatal("the CA file changed")
	}
	more, _ := OpenNames([]string{"corp.example"})
	if _, outcome, err := Ensure(dir, more, 10); err != nil || outcome != Reissued {
		t.Fatalf("Ensure with another exclusion: %v, %v", outcome, err)
	}
	listed := mustNames(t, "partner.example")
	ca, outcome, err := Ensure(dir, listed, 10)
	if err != nil || outcome != Reissued || ca.Covers("p1.partner.test") || !ca.Covers("partner.example") {
		t.Fatalf("Ensure for a listed-hosts CA after an open one: %v, %v", outcome, err)
	}
	ca, outcome, err = Ensure(dir, open, 10)
	if err != nil || outcome != Reissued || !ca.Covers("p1.partner.test") {
		t.Fatalf("Ensure for an open CA after a listed one: %v, %v", outcome, err)
	}
	if _, err := OpenNames([]string{"10.0.0.0/8"}); err == nil {
		t.Error("OpenNames accepted an IP range to exclude")
	}
	if _, err := OpenNames([]string{"bad_name!"}); err == nil {
		t.Error("OpenNames accepted a malformed name")
	}
}

// TestPartnerName: a CA open to any DNS name never vouches for localhost,
// a single label or a two-label name whose last label is not a public
// suffix (Kubernetes' short forms, resolved through the search path); it
// vouches for public names and for longer names, and an operator's listed
// names are the operator's.
func TestPartnerName(t *testing.T) {
	for _, tc := range []struct {
		host string
		ok   bool
	}{
		{"localhost", false},
		{"LocalHost.", false},
		{"app.localhost", false},
		{"kubernetes", false},
		{"redis", false},
		{"kubernetes.default", false},
		{"redis.ns", false},
		{"billing.payments", false},
		{"partner.test", false},
		{"kubernetes.default.svc", false},
		{"redis.ns.svc.cluster.local", false},
		{"stripe.com", true},
		{"hooks.slack.com", true},
		{"partner.dev", true},
		{"example.co.uk", true},
		{"hooks.partner.example", true},
		{"p1.partner.test", true},
	} {
		open, _ := OpenNames(nil)
		if got := open.Covers(tc.host); got != tc.ok {
			t.Errorf("open Names.Covers(%q) = %v, want %v", tc.host, got, tc.ok)
		}
	}
	ca, _, err := Ensure(filepath.Join(t.TempDir(), "mitm"), mustOpen(t), 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"localhost", "kubernetes", "kubernetes.default", "redis.ns", "redis.ns:6379"} {
		if ca.Covers(host) {
			t.Errorf("the open-world CA covers %q", host)
		}
		if c, err := ca.Certificate(host); err == nil {
			t.Errorf("the open-world CA issued a leaf for %q: %v", host, c.Leaf.DNSNames)
		}
	}
	if got := ca.Uncovered([]string{"redis.ns", "*.ns", "partner.dev", "kubernetes"}); strings.Join(got, ",") != "redis.ns,kubernetes" {
		t.Errorf("Uncovered = %q, want redis.ns and kubernetes", got)
	}
	listed, _, err := Ensure(filepath.Join(t.TempDir(), "mitm"), mustNames(t, "redis.ns"), 10)
	if err != nil {
		t.Fatal(err)
	}
	if !listed.Covers("redis.ns") || !listed.Covers("redis.ns:6379") {
		t.Error("a CA that lists redis.ns does not cover it")
	}
}

func mustOpen(t *testing.T) Names {
	t.Helper()
	n, err := OpenNames(nil)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
