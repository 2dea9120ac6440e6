package proxy

import (
	"context"
	"crypto/tls"
	"slices"
	"strings"
	"sync"
	"time"
)

// Before hookpace answers a captured client's handshake for a name it
// would intercept, it makes sure it can serve that connection in the
// middle, as Squid's peek does: a client that offers no HTTP/1.1 (gRPC
// offers h2 alone), a server that asks for a client certificate (only the
// app's own can answer it) or refuses HTTP/1.1 is spliced instead, the
// client's own handshake going to the server untouched. What the server
// wants is learnt with a probe handshake of hookpace's own, remembered
// per server name and address for probeTTL.

const (
	probeTTL      = 10 * time.Minute // how long a server's probe verdict holds
	probeRetry    = 30 * time.Second // how long a probe that failed holds
	probeTimeout  = 5 * time.Second
	maxProbeCache = 10000
)

// probeVerdict is what a probe learnt of one server: a Splice* label and
// why, or "" (hookpace can serve it).
type probeVerdict struct {
	label, why string
	until      time.Time
	done       chan struct{} // closed when the probe is over
}

// probes remembers probe verdicts by server name and address.
type probes struct {
	mu sync.Mutex
	m  map[string]*probeVerdict
}

// cannotIntercept says why a TLS connection to name at the server at
// (an address, or a CONNECT's host:port) must be spliced rather than
// intercepted (a Splice* label and why), or "". dial reaches that server
// for a probe. A host named in hosts is intercepted as configured,
// unprobed: its settings (client certificates among them) are the
// operator's.
func (p *Proxy) cannotIntercept(ctx context.Context, hello *tls.ClientHelloInfo, hp HostPolicy, at, name string, dial DialFunc) (label, why string) {
	if len(hello.SupportedProtos) > 0 && !slices.Contains(hello.SupportedProtos, "http/1.1") {
		return SpliceALPN, "the client offers " + strings.Join(hello.SupportedProtos, ", ") +
			" and not HTTP/1.1, which hookpace serves in the middle: spliced as without hookpace"
	}
	if hp.Named {
		return "", ""
	}
	v := p.probes.get(ctx, at, name, dial, time.Now())
	return v.label, v.why
}

// get is the verdict on name at the server at: the one remembered, or a
// new probe's. Concurrent first connections wait for one probe.
func (ps *probes) get(ctx context.Context, at, name string, dial DialFunc, now time.Time) *probeVerdict {
	key := name + " " + at
	ps.mu.Lock()
	if ps.m == nil {
		ps.m = map[string]*probeVerdict{}
	}
	if v, ok := ps.m[key]; ok && (!v.over() || now.Before(v.until)) {
		ps.mu.Unlock()
		select {
		case <-v.done:
			return v
		case <-ctx.Done():
			return &probeVerdict{}
		}
	}
	if len(ps.m) >= maxProbeCache {
		clear(ps.m)
	}
	v := &probeVerdict{done: make(chan struct{})}
	ps.m[key] = v
	ps.mu.Unlock()
	label, why, err := probe(ctx, at, name, dial)
	v.label, v.why, v.until = label, why, now.Add(probeTTL)
	if err != nil {
		v.until = now.Add(probeRetry)
	}
	close(v.done)
	return v
}

// over reports whether v's probe is over (its fields are then set).
func (v *probeVerdict) over() bool {
	select {
	case <-v.done:
		return true
	default:
		return false
	}
}

// probe makes a handshake of hookpace's own with the server at (dialled
// with dial) for name, offering HTTP/1.1 alone, and says whether it asked for a client
// certificate or refused HTTP/1.1. It sends no request: the handshake
// alone tells, and the server's certificate is not what it asks about.
// An error is a probe that could not tell (the connection will be
// intercepted and fail or not as the forwarded requests do).
func probe(ctx context.Context, at, name string, dial DialFunc) (label, why string, err error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	c, err := dial(ctx, "tcp", at)
	if err != nil {
		return "", "", err
	}
	defer c.Close()
	asked := false
	cfg := &tls.Config{ServerName: name, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12,
		InsecureSkipVerify: true, // nothing is sent: the probe asks what the server wants, not who it is
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			asked = true
			return &tls.Certificate{}, nil
		}}
	tc := tls.Client(c, cfg)
	err = tc.HandshakeContext(ctx)
	switch {
	case asked:
		return SpliceClientCert, "the server asks for a client certificate, which only the app holds: spliced as without hookpace", nil
	case err != nil && strings.Contains(err.Error(), "no application protocol"):
		return SpliceALPN, "the server refuses HTTP/1.1 (ALPN): it speaks h2 or another protocol only: spliced as without hookpace", nil
	case err != nil:
		return "", "", err
	}
	return "", "", nil
}
