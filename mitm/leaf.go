package mitm

import (
	"container/list"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/hookpace/hookpace/hostname"
)

const (
	leafValidity = 24 * time.Hour
	leafBackdate = time.Hour // tolerate clients whose clocks run slow
	renewBefore  = time.Hour // cached leaves this close to expiry are regenerated
)

// Certificate returns a leaf certificate for host (a DNS name or IP literal;
// any port and brackets are stripped) signed by the CA. Leaves are cached in
// a bounded LRU; concurrent first requests for a host generate it once.
func (ca *CA) Certificate(host string) (*tls.Certificate, error) {
	key, ip, err := normalizeHost(host)
	if err != nil {
		return nil, err
	}
	if !ca.Covers(key) {
		return nil, fmt.Errorf("mitm: %s is outside the CA's name constraints (%s)", key, ca.names)
	}

	ca.mu.Lock()
	if c, ok := ca.cache.get(key); ok && ca.now().Before(c.Leaf.NotAfter.Add(-renewBefore)) {
		ca.mu.Unlock()
		return c, nil
	}
	if cl, ok := ca.inflight[key]; ok {
		ca.mu.Unlock()
		<-cl.done
		return cl.cert, cl.err
	}
	cl := &call{done: make(chan struct{})}
	ca.inflight[key] = cl
	ca.mu.Unlock()

	defer func() {
		ca.mu.Lock()
		delete(ca.inflight, key)
		if cl.err == nil {
			ca.cache.add(key, cl.cert)
		}
		ca.mu.Unlock()
		close(cl.done)
	}()
	cl.err = errors.New("mitm: certificate generation panicked") // replaced unless generate panics
	cl.cert, cl.err = ca.generate(key, ip)
	return cl.cert, cl.err
}

// TLSConfig returns a server configuration for intercepting TLS to host.
// The certificate is host's whatever SNI the client sends: a tunnel
// reaches the one destination its CONNECT named, and the requests inside
// must name it too.
func (ca *CA) TLSConfig(host string) (*tls.Config, error) {
	if _, _, err := normalizeHost(host); err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return ca.Certificate(host)
		},
	}, nil
}

// call is one in-flight generation that later callers for the same host
// wait on instead of generating their own.
type call struct {
	done chan struct{}
	cert *tls.Certificate
	err  error
}

func (ca *CA) generate(name string, ip netip.Addr) (*tls.Certificate, error) {
	if ca.genHook != nil {
		ca.genHook(name)
	}
	now := ca.now()
	notAfter := now.Add(leafValidity)
	if ca.cert.NotAfter.Before(notAfter) {
		notAfter = ca.cert.NotAfter
	}
	if !notAfter.After(now) {
		return nil, fmt.Errorf("mitm: CA certificate expired at %s", ca.cert.NotAfter.UTC().Format(time.RFC3339))
	}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("mitm: generate key for %q: %w", name, err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		NotBefore:             now.Add(-leafBackdate),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	// A common name only for a DNS name: OpenSSL checks a CN against the
	// CA's DNS constraints, which exclude every name from an IP-only CA.
	if len(name) <= 64 && !ip.IsValid() { // the X.520 upper bound for a common name
		tmpl.Subject = pkix.Name{CommonName: name}
	}
	if ip.IsValid() {
		tmpl.IPAddresses = []net.IP{ip.AsSlice()}
	} else {
		tmpl.DNSNames = []string{name}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, priv.Public(), ca.key)
	if err != nil {
		return nil, fmt.Errorf("mitm: sign certificate for %q: %w", name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("mitm: parse certificate for %q: %w", name, err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv, Leaf: leaf}, nil
}

// normalizeHost strips a port and brackets and returns the cache key: the
// canonical IP for IP literals, else the lower-case name without a trailing
// dot. Names follow hookpace's one rule (package hostname).
func normalizeHost(host string) (string, netip.Addr, error) {
	h := host
	if hh, _, err := net.SplitHostPort(h); err == nil {
		h = hh
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	name, ip, err := hostname.Parse(h)
	if err != nil {
		return "", netip.Addr{}, fmt.Errorf("mitm: bad host %q: %w", host, err)
	}
	if ip.IsValid() {
		ip = ip.Unmap()
		return ip.String(), ip, nil
	}
	return name, netip.Addr{}, nil
}

// lru is a fixed-size least-recently-used cache. The CA's mutex guards it.
type lru struct {
	size  int
	order *list.List // front is most recently used; values are *lruEntry
	items map[string]*list.Element
}

type lruEntry struct {
	key  string
	cert *tls.Certificate
}

func newLRU(size int) *lru {
	return &lru{size: size, order: list.New(), items: make(map[string]*list.Element)}
}

func (c *lru) get(key string) (*tls.Certificate, bool) {
	el, ok := c.items[key]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*lruEntry).cert, true
}

func (c *lru) add(key string, cert *tls.Certificate) {
	if el, ok := c.items[key]; ok {
		el.Value.(*lruEntry).cert = cert
		c.order.MoveToFront(el)
		return
	}
	c.items[key] = c.order.PushFront(&lruEntry{key: key, cert: cert})
	for c.order.Len() > c.size {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.items, oldest.Value.(*lruEntry).key)
	}
}

func (c *lru) len() int { return c.order.Len() }
