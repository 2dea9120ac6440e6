package e2e

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// conformanceDoor is one of hookpace's parsers as a client meets it.
type conformanceDoor struct {
	dial   func() (net.Conn, error)
	target func(path string) string // the request target for path
	host   string                   // the Host header
	rc     *Receiver                // where what is accepted arrives
}

// conformanceDoors starts one hookpace with its CA and an inbound route
// that spools every POST (plain and TLS), and returns every door but
// capture: the proxy listener (absolute-form), plain HTTP inside a
// CONNECT tunnel, the MITM (TLS inside a tunnel), and the inbound routes. (The capture listener is
// reached only through an iptables redirect in a network namespace, see
// capture_test.go; its requests are served by the same inner server and
// judge as a tunnel's.)
func conformanceDoors(t *testing.T) (*Hookpace, map[string]conformanceDoor) {
	t.Helper()
	caDir := filepath.Join(t.TempDir(), "ca")
	if out, err := exec.Command(binary, "ca", "init", "--dir", caDir, "--unconstrained").CombinedOutput(); err != nil {
		t.Fatalf("hookpace ca init: %v\n%s", err, out)
	}
	caCert, caKey := filepath.Join(caDir, "ca.crt"), filepath.Join(caDir, "ca.key")
	plain, secure, app, tlsApp := NewReceiver(t), NewTLSReceiver(t), NewReceiver(t), NewReceiver(t)
	trust := []string{"SSL_CERT_FILE=" + secRootsPEM(t, secure.Certificate())}
	certDir := t.TempDir()
	inboundCA := x509.NewCertPool()
	inboundCA.AppendCertsFromPEM(serveCert(t, certDir))
	hp := StartEnv(t, trust, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
mitm: {ca_cert: %s, ca_key: %s}
spool: {max_header_bytes: 65536}
hosts:
  "%s": {connect: mitm}
inbound:
  - name: every
    listen: 127.0.0.1:0
    to: %s
  - name: every-tls
    listen: 127.0.0.1:0
    to: %s
    cert_file: %s
    key_file: %s
`, caCert, caKey, secure.Host(), app.URL, tlsApp.URL, filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key")))
	addrs := inboundAddrs(t, hp)
	if addrs["every"] == "" || addrs["every-tls"] == "" {
		t.Fatalf("no inbound listening lines: %v\n%s", addrs, hp.Log())
	}
	roots := x509.NewCertPool()
	pemBytes, err := os.ReadFile(caCert)
	if err != nil || !roots.AppendCertsFromPEM(pemBytes) {
		t.Fatalf("reading %s: %v", caCert, err)
	}
	path := func(p string) string { return p }
	return hp, map[string]conformanceDoor{
		"door": {dial: func() (net.Conn, error) { return net.DialTimeout("tcp", hp.Proxy, 10*time.Second) },
			target: func(p string) string { return plain.URL + p }, host: plain.Host(), rc: plain},
		"tunnel": {dial: func() (net.Conn, error) { return tunnelDial(hp.Proxy, plain.Host(), "") },
			target: path, host: plain.Host(), rc: plain},
		"mitm": {dial: func() (net.Conn, error) {
			c, err := tunnelDial(hp.Proxy, secure.Host(), "")
			if err != nil {
				return nil, err
			}
			tc := tls.Client(c, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
			if err := tc.Handshake(); err != nil {
				c.Close()
				return nil, fmt.Errorf("TLS handshake inside the tunnel: %w", err)
			}
			return tc, nil
		}, target: path, host: secure.Host(), rc: secure},
		"inbound": {dial: func() (net.Conn, error) { return net.DialTimeout("tcp", addrs["every"], 10*time.Second) },
			target: path, host: addrs["every"], rc: app},
		"inbound-tls": {dial: func() (net.Conn, error) {
			return tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addrs["every-tls"],
				&tls.Config{RootCAs: inboundCA, ServerName: "127.0.0.1"})
		}, target: path, host: addrs["every-tls"], rc: tlsApp},
	}
}

// answer is what a door said to one raw request.
type answer struct {
	status int    // 0: no answer
	closed bool   // the connection was closed after it
	err    string // why there was no answer
	at     time.Time
}

// sendRaw writes raw on a new connection of d (while reading, so that a
// server that answers early is heard) and reads the first answer; after a
// refusal it checks that the connection is then closed.
func sendRaw(d conformanceDoor, raw string) answer {
	c, err := d.dial()
	if err != nil {
		return answer{err: "dial: " + err.Error()}
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second)) // a hang guard, not an assertion
	start := time.Now()
	go io.WriteString(c, raw)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	for err == nil && resp.StatusCode < 200 { // 100 Continue, then the answer
		resp, err = http.ReadResponse(br, nil)
	}
	if err != nil {
		return answer{err: err.Error()}
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	a := answer{status: resp.StatusCode, at: time.Now()}
	if took := a.at.Sub(start); took > 2*slack*time.Second {
		a.err = fmt.Sprintf("answered after %v", took.Round(time.Millisecond))
	}
	if resp.StatusCode >= 400 {
		c.SetReadDeadline(time.Now().Add(5 * slack * time.Second))
		_, err := io.Copy(io.Discard, br)
		var ne net.Error
		a.closed = !(errors.As(err, &ne) && ne.Timeout())
		if took := time.Since(a.at); took > 2*slack*time.Second {
			a.err = fmt.Sprintf("closed %v after the answer", took.Round(time.Millisecond))
		}
	}
	return a
}

// Each case of the conformance table, written raw on its own connection
// to every door of the real binary: refused (4xx, or 501 for a transfer
// coding not implemented, and the connection closed), or acknowledged
// and delivered exactly once with exactly the body sent. Nothing is
// acknowledged and lost; no look-alike of a framing field reaches a
// partner; and a plain webhook sent after all of them arrives within 5 s
// (none stalls its host).
func TestConformance(t *testing.T) {
	t.Parallel()
	_, doors := conformanceDoors(t)
	// What the judge lets through an inbound route over TLS still tells
	// the app it came over TLS.
	d := doors["inbound-tls"]
	if a := sendRaw(d, "GET /health HTTP/1.1\r\nHost: "+d.host+"\r\nConnection: close\r\n\r\n"); a.status != http.StatusOK {
		t.Fatalf("GET /health through the TLS route: %+v", a)
	}
	if got := d.rc.Arrivals(); len(got) != 1 || got[0].Header.Get("X-Forwarded-Proto") != "https" {
		t.Errorf("the app got %d requests, X-Forwarded-Proto %q; want 1, https", len(got), got[0].Header.Get("X-Forwarded-Proto"))
	}
	for _, name := range []string{"door", "tunnel", "mitm", "inbound", "inbound-tls"} {
		d := doors[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			checkConformance(t, name, d, func(raws []string) []answer {
				out := make([]answer, len(raws))
				for i, raw := range raws {
					out[i] = sendRaw(d, raw)
				}
				return out
			})
		})
	}
}

// checkConformance sends every case of the table for door name (with
// send, in order, each on a new connection, then a plain webhook) and
// checks what the door answered and what reached d.rc.
func checkConformance(t *testing.T, name string, d conformanceDoor, send func(raws []string) []answer) {
	t.Helper()
	var cases []conformanceCase
	var raws, paths []string
	for _, tc := range conformanceCases {
		if tc.doors != "" && !strings.Contains(","+tc.doors+",", ","+name+",") {
			continue
		}
		p := "/conf/" + name + "/" + tc.name
		cases = append(cases, tc)
		paths = append(paths, p)
		raws = append(raws, strings.NewReplacer("{T}", d.target(p)+tc.suffix, "{H}", d.host).Replace(tc.raw))
	}
	// A plain webhook after all of them: its host is not stalled.
	after := "/conf/" + name + "/after"
	raws = append(raws, "POST "+d.target(after)+" HTTP/1.1\r\nHost: "+d.host+"\r\nContent-Length: 5\r\nConnection: close\r\n\r\n"+hello)
	answers := send(raws)
	if len(answers) != len(raws) {
		t.Fatalf("%d answers to %d requests", len(answers), len(raws))
	}
	sent := answers[len(cases)].at
	if a := answers[len(cases)]; a.status < 200 || a.status >= 300 {
		t.Fatalf("the plain webhook after the cases: %+v", a)
	}
	accepted := map[string]string{after: hello} // path → the body it must arrive with
	var refused []string
	for i, tc := range cases {
		a, p := answers[i], paths[i]
		if a.status != 0 && a.err != "" {
			t.Logf("%s: %d %s", tc.name, a.status, a.err)
		}
		switch {
		case a.status >= 200 && a.status < 300:
			if tc.refuse {
				t.Errorf("%s: acknowledged (%d), must be refused", tc.name, a.status)
			}
			accepted[p] = tc.want
		case a.status >= 400 && a.status < 500 || a.status == http.StatusNotImplemented:
			if !a.closed {
				t.Errorf("%s: refused (%d) but the connection was left open", tc.name, a.status)
			}
			if !tc.refuse && tc.want != "" {
				t.Logf("%s: refused (%d), the door's choice", tc.name, a.status)
			}
			refused = append(refused, p)
		case a.status == 0:
			t.Errorf("%s: no answer: %s", tc.name, a.err)
		default:
			t.Errorf("%s: answered %d: neither a refusal nor an acknowledgement", tc.name, a.status)
		}
	}
	arrived := func(p string) []Arrival {
		var out []Arrival
		for _, a := range d.rc.Arrivals() {
			if pathOf(a.Path) == p {
				out = append(out, a)
			}
		}
		return out
	}
	Poll(t, 5*time.Second, "the plain webhook sent after the cases", func() bool { return len(arrived(after)) > 0 })
	took := arrived(after)[0].At.Sub(sent)
	t.Logf("the plain webhook arrived %v after its 202; %d cases acknowledged, %d refused",
		took.Round(time.Millisecond), len(accepted)-1, len(refused))
	Poll(t, 30*time.Second, "every acknowledged case delivered", func() bool {
		for p := range accepted {
			if len(arrived(p)) == 0 {
				return false
			}
		}
		return true
	})
	for p, want := range accepted {
		got := arrived(p)
		if len(got) != 1 || !bytes.Equal(got[0].Body, []byte(want)) {
			var bodies []string
			for _, a := range got {
				bodies = append(bodies, fmt.Sprintf("%q", a.Body))
			}
			t.Errorf("%s: acknowledged with %q, delivered %d times: %s", p, want, len(got), strings.Join(bodies, ", "))
		}
	}
	for _, p := range refused {
		if n := len(arrived(p)); n > 0 {
			t.Errorf("%s: refused at the door, yet delivered %d times", p, n)
		}
	}
	for _, a := range d.rc.Arrivals() {
		for k := range a.Header {
			switch strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(k)) {
			case "transferencoding", "contentlength", "host", "connection", "upgrade", "te":
				// Content-Length is hookpace's own framing, and
				// Connection: close its own word that it won't keep
				// this connection (a host's first delivery); any other
				// came from the sender.
				own := k == "Content-Length" || k == "Connection" && len(a.Header[k]) == 1 && a.Header[k][0] == "close"
				if !own {
					t.Errorf("%s reached the partner with %s: %q", a.Path, k, a.Header[k])
				}
			}
		}
	}
}

// pathOf is the case's path of a request target: /conf/DOOR/CASE,
// without what the case added after it.
func pathOf(target string) string {
	p, _, _ := strings.Cut(target, "?")
	if parts := strings.SplitN(p, "/", 5); len(parts) >= 4 {
		return strings.Join(parts[:4], "/")
	}
	return p
}
