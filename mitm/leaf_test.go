package mitm

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func pool(t *testing.T, ca *CA) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(ca.CertPEM()) {
		t.Fatal("CertPEM did not parse")
	}
	return p
}

// countGenerations installs a generation hook and returns its counter.
func countGenerations(ca *CA) *atomic.Int64 {
	var n atomic.Int64
	ca.genHook = func(string) { n.Add(1) }
	return &n
}

func TestLeafVerifies(t *testing.T) {
	ca := newTestCA(t, 0)
	roots := pool(t, ca)
	tests := []struct{ host, verifyAs string }{
		{"hooks.example", "hooks.example"},
		{"Hooks.Example.:443", "hooks.example"},
		{"127.0.0.1", "127.0.0.1"},
		{"127.0.0.1:8443", "127.0.0.1"},
		{"[::1]:443", "::1"},
		{"::1", "::1"},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			before := time.Now()
			c, err := ca.Certificate(tt.host)
			if err != nil {
				t.Fatalf("Certificate: %v", err)
			}
			leaf := c.Leaf
			if _, err := leaf.Verify(x509.VerifyOptions{
				DNSName:   tt.verifyAs,
				Roots:     roots,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			}); err != nil {
				t.Fatalf("Verify as %s: %v", tt.verifyAs, err)
			}
			if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "other.example", Roots: roots}); err == nil {
				t.Errorf("leaf also verifies for other.example")
			}
			if k, ok := c.PrivateKey.(*ecdsa.PrivateKey); !ok || k.Curve != elliptic.P256() {
				t.Errorf("leaf key is %T, want ECDSA P-256", c.PrivateKey)
			}
			if leaf.IsCA {
				t.Errorf("leaf is a CA")
			}
			if d := before.Sub(leaf.NotBefore); d < 59*time.Minute || d > 61*time.Minute {
				t.Errorf("NotBefore is %v before now, want 1h", d)
			}
			if d := leaf.NotAfter.Sub(before); d < leafValidity-time.Minute || d > leafValidity+time.Minute {
				t.Errorf("NotAfter is %v after now, want 7d", d)
			}
		})
	}
	for _, bad := range []string{"", ":443", "bad host", "a..example", "evil.example/x"} {
		if _, err := ca.Certificate(bad); err == nil {
			t.Errorf("Certificate(%q) succeeded", bad)
		}
	}
}

func TestLeafValidityCappedByCA(t *testing.T) {
	now := time.Now()
	certPath, keyPath := writePair(t, t.TempDir(), caTemplate(now.Add(-time.Hour), now.Add(leafValidity/2)))
	ca, err := LoadCA(certPath, keyPath, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ca.Certificate("hooks.example")
	if err != nil {
		t.Fatal(err)
	}
	if !c.Leaf.NotAfter.Equal(ca.cert.NotAfter) {
		t.Errorf("leaf NotAfter %v, want CA's %v", c.Leaf.NotAfter, ca.cert.NotAfter)
	}
}

func TestCacheBoundedLRU(t *testing.T) {
	ca := newTestCA(t, 2)
	gens := countGenerations(ca)
	get := func(host string) *tls.Certificate {
		t.Helper()
		c, err := ca.Certificate(host)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	a := get("a.example")
	if again := get("A.EXAMPLE.:443"); again != a {
		t.Errorf("cache miss for the same host in another spelling")
	}
	get("b.example")
	get("a.example") // a is now the most recently used
	get("c.example") // evicts b
	if n := ca.cache.len(); n != 2 {
		t.Errorf("cache holds %d leaves, want 2", n)
	}
	if n := gens.Load(); n != 3 {
		t.Errorf("%d generations, want 3", n)
	}
	if get("a.example") != a {
		t.Errorf("a was evicted, want b evicted")
	}
	get("b.example")
	if n := gens.Load(); n != 4 {
		t.Errorf("%d generations after re-requesting b, want 4", n)
	}
}

func TestCacheRenewsNearExpiry(t *testing.T) {
	ca := newTestCA(t, 0)
	gens := countGenerations(ca)
	now := time.Now()
	ca.now = func() time.Time { return now }

	first, err := ca.Certificate("a.example")
	if err != nil {
		t.Fatal(err)
	}
	now = first.Leaf.NotAfter.Add(-renewBefore - time.Minute)
	if c, _ := ca.Certificate("a.example"); c != first {
		t.Errorf("leaf renewed more than 1h before expiry")
	}
	now = first.Leaf.NotAfter.Add(-renewBefore + time.Minute)
	second, err := ca.Certificate("a.example")
	if err != nil {
		t.Fatal(err)
	}
	if second == first || !second.Leaf.NotAfter.After(first.Leaf.NotAfter) {
		t.Errorf("leaf within 1h of expiry was not renewed")
	}
	if n := gens.Load(); n != 2 {
		t.Errorf("%d generations, want 2", n)
	}
}

func TestConcurrentFirstRequestsGenerateOnce(t *testing.T) {
	ca := newTestCA(t, 0)
	synctest.Test(t, func(t *testing.T) {
		var gens atomic.Int64
		release := make(chan struct{})
		ca.genHook = func(string) {
			gens.Add(1)
			<-release // hold the generation until every caller is waiting
		}
		const callers = 8
		var wg sync.WaitGroup
		certs := make([]*tls.Certificate, callers)
		for i := range callers {
			wg.Go(func() {
				c, err := ca.Certificate("hooks.example")
				if err != nil {
					t.Error(err)
				}
				certs[i] = c
			})
		}
		synctest.Wait() // one caller in the hook, the rest waiting on it
		close(release)
		wg.Wait()
		if n := gens.Load(); n != 1 {
			t.Errorf("%d generations for %d concurrent callers, want 1", n, callers)
		}
		for i, c := range certs {
			if c == nil || c != certs[0] {
				t.Errorf("caller %d got a different certificate", i)
			}
		}
	})
}

// handshake runs a TLS handshake over a loopback TCP connection between a
// server using srv and a client using cli, returning the client's state.
// (net.Pipe is unbuffered and deadlocks when both sides write at once,
// as TLS 1.3 session tickets and the client's Finished do.)
func handshake(t *testing.T, srv, cli *tls.Config) (tls.ConnectionState, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srvErr := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			srvErr <- err
			return
		}
		defer conn.Close()
		s := tls.Server(conn, srv)
		err = s.Handshake()
		if err == nil {
			_, err = s.Write([]byte("x"))
		}
		srvErr <- err
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := tls.Client(conn, cli)
	err = c.Handshake()
	if err == nil {
		_, err = c.Read(make([]byte, 1))
	}
	conn.Close() // unblocks the server if the client gave up
	if serr := <-srvErr; err == nil {
		err = serr
	}
	return c.ConnectionState(), err
}

func TestTLSHandshake(t *testing.T) {
	ca := newTestCA(t, 0)
	roots := pool(t, ca)

	tests := []struct {
		name, host, serverName string
	}{
		{"sni", "hooks.example:443", "hooks.example"},
		{"ip without sni", "127.0.0.1:8443", "127.0.0.1"}, // clients send no SNI for IPs
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, err := ca.TLSConfig(tt.host)
			if err != nil {
				t.Fatal(err)
			}
			if srv.MinVersion != tls.VersionTLS12 {
				t.Errorf("MinVersion = %x", srv.MinVersion)
			}
			st, err := handshake(t, srv, &tls.Config{RootCAs: roots, ServerName: tt.serverName, NextProtos: []string{"h2", "http/1.1"}})
			if err != nil {
				t.Fatalf("handshake: %v", err)
			}
			if st.NegotiatedProtocol != "http/1.1" {
				t.Errorf("ALPN = %q, want http/1.1", st.NegotiatedProtocol)
			}
		})
	}

	srv, err := ca.TLSConfig("hooks.example")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := handshake(t, srv, &tls.Config{RootCAs: x509.NewCertPool(), ServerName: "hooks.example"}); err == nil {
		t.Errorf("handshake succeeded for a client that does not trust the CA")
	}
	if _, err := handshake(t, srv, &tls.Config{RootCAs: roots, ServerName: "hooks.example", MaxVersion: tls.VersionTLS11}); err == nil {
		t.Errorf("handshake succeeded with TLS 1.1")
	}
	if _, err := ca.TLSConfig("bad host"); err == nil {
		t.Errorf("TLSConfig accepted a bad host")
	}
}

// The leaf is the CONNECT target's, whatever SNI the client sends.
func TestTLSHandshakeIgnoresSNI(t *testing.T) {
	ca := newTestCA(t, 0)
	srv, err := ca.TLSConfig("203.0.113.7:443")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := handshake(t, srv, &tls.Config{RootCAs: pool(t, ca), ServerName: "hooks.example"}); err == nil {
		t.Fatal("a tunnel to 203.0.113.7 answered SNI hooks.example with a certificate for it")
	}
}
