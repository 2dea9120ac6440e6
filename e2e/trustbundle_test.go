package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"testing"
)

// The trust bundle an app is pointed at (SSL_CERT_FILE replaces its
// roots) keeps the extra roots hookpace itself trusts: with a corporate
// CA in tls.ca_file, a client that trusts the bundle alone verifies a
// server that CA signed, directly, as it did before it trusted
// hookpace; the system roots alone do not; hookpace's CA is there too.
func TestTrustBundleKeepsExtraRoots(t *testing.T) {
	t.Parallel()
	internal, corporateCA := tlsPartner(t, "billing.corp.test")
	port := internal.URL[strings.LastIndex(internal.URL, ":")+1:]
	hp := StartResolving(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.1"]}
tls: {ca_file: %s}
hosts:
  "billing.corp.test:%s": {rate: 10/s}
`, corporateCA, port), "billing.corp.test")
	bundlePEM, err := os.ReadFile(hookpaceCA(t, hp, "bundle"))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(hookpaceCA(t, hp, "cert"))
	if err != nil {
		t.Fatal(err)
	}
	dial := func(roots *x509.CertPool) error {
		c, err := tls.Dial("tcp", "127.0.0.1:"+port, &tls.Config{RootCAs: roots, ServerName: "billing.corp.test"})
		if err == nil {
			c.Close()
		}
		return err
	}
	system, err := x509.SystemCertPool()
	if err != nil {
		t.Fatal(err)
	}
	if err := dial(system); err == nil {
		t.Fatal("the system roots verify the corporate server: the test proves nothing")
	}
	bundle := x509.NewCertPool()
	if !bundle.AppendCertsFromPEM(bundlePEM) {
		t.Fatal("the bundle holds no certificate")
	}
	if err := dial(bundle); err != nil {
		t.Errorf("a client trusting the bundle alone: %v; want the corporate CA (tls.ca_file) kept", err)
	}
	if !strings.Contains(string(bundlePEM), strings.TrimSpace(string(caPEM))) {
		t.Error("the bundle lacks hookpace's CA")
	}
}
