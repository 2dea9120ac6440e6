package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The proxy's door keeps OpenTelemetry's http.server.request.duration,
// once per request: three absolute-form webhooks to an http:// partner
// are three POSTs answered 202 over http; two to an https:// partner,
// read inside an intercepted tunnel, are two POSTs answered 202 over
// https; the CONNECT that opened the tunnel (its time is the tunnel's
// life) is not among them.
func TestDoorServerRequestDuration(t *testing.T) {
	t.Parallel()
	plain := NewReceiver(t)
	partner, partnerCA := tlsPartner(t, "partner.test")
	port := partner.URL[strings.LastIndex(partner.URL, ":")+1:]
	hp := StartResolving(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.1"]}
tls: {ca_file: %s}
hosts:
  %q: {rate: 100/s}
  "partner.test:%s": {rate: 100/s}
`, partnerCA, plain.Host(), port), "partner.test")

	for i := range 3 {
		if status, id := hp.Post(hp.Client(), plain.URL+"/hooks", fmt.Appendf(nil, `{"n":%d}`, i), nil); status != http.StatusAccepted || id == "" {
			t.Fatalf("http:// webhook %d: %d, id %q", i, status, id)
		}
	}
	pem, err := os.ReadFile(hookpaceCA(t, hp, "bundle"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	proxy, _ := url.Parse("http://" + hp.Proxy)
	tc := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy), TLSClientConfig: &tls.Config{RootCAs: roots}}, Timeout: 30 * time.Second}
	for i := range 2 {
		if status, id := hp.Post(tc, "https://partner.test:"+port+"/hooks", fmt.Appendf(nil, `{"n":%d}`, i), nil); status != http.StatusAccepted || id == "" {
			t.Fatalf("https:// webhook %d: %d, id %q", i, status, id)
		}
	}

	re := regexp.MustCompile(`(?m)^http_server_request_duration_seconds_count\{([^}]*)\} (\d+)$`)
	count := func(method, scheme, status string) int {
		total := 0
		for _, m := range re.FindAllStringSubmatch(hp.Metrics(), -1) {
			if strings.Contains(m[1], `http_request_method="`+method+`"`) && strings.Contains(m[1], `url_scheme="`+scheme+`"`) &&
				strings.Contains(m[1], `http_response_status_code="`+status+`"`) {
				n, _ := strconv.Atoi(m[2])
				total += n
			}
		}
		return total
	}
	if n := count("POST", "http", "202"); n != 3 {
		t.Errorf("202 POSTs over http: %d, want 3\n%s", n, hp.Metrics())
	}
	if n := count("POST", "https", "202"); n != 2 {
		t.Errorf("202 POSTs over https (inside the tunnel): %d, want 2\n%s", n, hp.Metrics())
	}
	if strings.Contains(hp.Metrics(), `http_request_method="CONNECT"`) {
		t.Errorf("a CONNECT is timed as a request:\n%s", hp.Metrics())
	}
}
