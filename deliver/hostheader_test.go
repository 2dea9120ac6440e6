package deliver

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hookpace/hookpace/spool"
)

// A webhook spooled with its scheme's default port in its URL (as a
// CONNECT to name:443 gives it) reaches the partner with Host: name; any
// other port stays in Host. The partner is real; the client's dialer
// sends every name and port to it, as DNS would.
func TestHostHeaderWithoutDefaultPort(t *testing.T) {
	hosts := make(chan string, 10)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		hosts <- r.Host
	})
	tlsPartner := httptest.NewTLSServer(handler)
	defer tlsPartner.Close()
	plainPartner := httptest.NewServer(handler)
	defer plainPartner.Close()
	tr := tlsPartner.Client().Transport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		to := plainPartner.Listener.Addr().String()
		if _, port, _ := net.SplitHostPort(addr); port == "443" || port == "8443" {
			to = tlsPartner.Listener.Addr().String()
		}
		return (&net.Dialer{}).DialContext(ctx, network, to)
	}

	s, err := openJournaled(spool.Options{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	q := &signalQueue{Spool: s, deleted: make(chan *spool.Message, 10), buried: make(chan string, 10)}
	d := New(Options{Reader: q, Store: q, Stats: q, Journal: journalOf(q.Spool), Policy: fixed(policy(100, 10, 1)),
		Client: &http.Client{Transport: tr}, Logger: slog.New(slog.DiscardHandler)})
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		d.Stop(context.Background())
		s.Close()
	}()
	for _, tc := range []struct{ url, host string }{
		{"https://partner.example:443/hook", "partner.example"},
		{"https://partner.example/hook", "partner.example"},
		{"https://other.example:8443/hook", "other.example:8443"},
		{"http://plain.example:80/hook", "plain.example"},
		{"http://plain.example:8080/hook", "plain.example:8080"},
		{"https://[2001:db8::1]:443/hook", "[2001:db8::1]"},
	} {
		appendTo(t, q, tc.url)
		if got := <-hosts; got != tc.host {
			t.Errorf("%s: Host %q, want %q", tc.url, got, tc.host)
		}
		<-q.deleted
	}
}
