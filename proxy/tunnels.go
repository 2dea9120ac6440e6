package proxy

import (
	"cmp"
	"context"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/hookpace/hookpace/mitm"
)

// maxTunnelHosts bounds the hosts the tunnel book remembers; CONNECTs to
// further hosts are counted under otherTunnels.
const (
	maxTunnelHosts = 1000
	otherTunnels   = "(other hosts)"
)

// TunnelStat is what the CONNECTs to one host became since the start.
type TunnelStat struct {
	Host   string    `json:"host"`
	Mode   string    `json:"mode"` // the last one: intercepted, passthrough or refused
	Count  int64     `json:"count"`
	First  time.Time `json:"first"`
	Last   time.Time `json:"last"`
	Reason string    `json:"reason,omitempty"` // why it was not intercepted
}

// tunnelBook keeps a TunnelStat per host, for the status page, hookpace
// status and the once-per-host warning. A host's rejections (a client
// that refused hookpace's certificate) have an entry of their own, which
// the host's later tunnels leave listed: a failed webhook stays in view.
type tunnelBook struct {
	mu    sync.Mutex
	hosts map[bookKey]*TunnelStat
}

type bookKey struct {
	host     string
	rejected bool
}

// add counts one CONNECT and reports whether it is the first to host in
// this mode.
func (b *tunnelBook) add(host, mode, reason string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.hosts == nil {
		b.hosts = map[bookKey]*TunnelStat{}
	}
	k := bookKey{host, mode == TunnelRejected}
	s, ok := b.hosts[k]
	if !ok && len(b.hosts) >= maxTunnelHosts {
		k.host = otherTunnels
		s, ok = b.hosts[k]
	}
	if !ok {
		s = &TunnelStat{Host: k.host, First: now}
		b.hosts[k] = s
	}
	first := !ok || s.Mode != mode
	s.Mode, s.Reason, s.Last = mode, reason, now
	s.Count++
	return first
}

// Tunnels lists what the CONNECTs to each host became since the start,
// those not intercepted first, then by host.
func (p *Proxy) Tunnels() []TunnelStat {
	b := &p.tunnels
	b.mu.Lock()
	out := make([]TunnelStat, 0, len(b.hosts))
	for _, s := range b.hosts {
		out = append(out, *s)
	}
	b.mu.Unlock()
	slices.SortFunc(out, func(a, b TunnelStat) int {
		ai, bi := a.Mode == TunnelIntercepted, b.Mode == TunnelIntercepted
		if ai != bi {
			if ai {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.Host, b.Host)
	})
	return out
}

// countTunnel records one CONNECT to host in the book, the metric and,
// the first time a host is not intercepted, a warning that says why and
// what to do.
func (p *Proxy) countTunnel(ctx context.Context, host, mode, reason string) {
	p.opts.Metrics.Tunnel(ctx, host, mode, "")
	p.noteTunnel(host, mode, reason)
}

// noteTunnel books one tunnel to host and, the first time for host and
// mode, says why at warning level (not for interception).
func (p *Proxy) noteTunnel(host, mode, reason string) {
	if !p.tunnels.add(host, mode, reason, time.Now()) || mode == TunnelIntercepted {
		return
	}
	switch mode {
	case TunnelPassthrough:
		p.log.Warn("connect: https passed through unpaced: not spooled, not paced, not retried", "host", host, "reason", reason)
	case TunnelRejected:
		p.log.Warn("connect: a client rejected hookpace's certificate: its https webhook failed", "host", host, "reason", reason,
			"fix", trustFix)
	}
}

// trustFix is what each runtime needs to trust hookpace's CA: the bundle
// (hookpace ca bundle) or, for Java, truststore.p12 beside it.
const trustFix = "point the app at the trust bundle (hookpace ca bundle): SSL_CERT_FILE (Go, OpenSSL, Ruby, httpx), " +
	"REQUESTS_CA_BUNDLE (Python requests), CURL_CA_BUNDLE (curl), NODE_EXTRA_CA_CERTS (Node), " +
	"JAVA_TOOL_OPTIONS=-Djavax.net.ssl.trustStore=DIR/truststore.p12 -Djavax.net.ssl.trustStoreType=PKCS12 -Djavax.net.ssl.trustStorePassword=changeit (Java)"

// SetCA replaces the CA that intercepts CONNECT (a reload re-issued it);
// nil turns interception off. Spliced tunnels to hosts it now intercepts
// are closed (endStale).
func (p *Proxy) SetCA(ca *mitm.CA) {
	p.ca.Store(ca)
	p.endStale()
}

// CA is the CA that intercepts CONNECT, or nil.
func (p *Proxy) CA() *mitm.CA { return p.ca.Load() }

// liveTunnel is a CONNECT being spliced through: its two connections,
// closed together when a reload makes its host intercepted.
type liveTunnel struct {
	host   string // the host key its policy was taken for
	name   string // the host name, for the CA's Covers
	client net.Conn
	up     net.Conn
	// pinned: spliced for what its client or server speaks, which
	// hookpace cannot serve in the middle under any policy.
	pinned bool
}

// liveTunnels are the tunnels being spliced through now.
type liveTunnels struct {
	mu  sync.Mutex
	set map[*liveTunnel]struct{}
}

func (l *liveTunnels) add(t *liveTunnel) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.set == nil {
		l.set = map[*liveTunnel]struct{}{}
	}
	l.set[t] = struct{}{}
}

func (l *liveTunnels) remove(t *liveTunnel) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.set, t)
}

// endIntercepted closes every spliced tunnel whose host a new CONNECT
// would now intercept (pol says mitm and ca covers it), so that the app's
// next request comes through a new CONNECT and is paced. An idle
// keep-alive connection is simply closed (clients open a new one); a
// request in flight at that instant fails with a broken connection, as it
// would at any network fault. Reports how many were closed, by host.
func (l *liveTunnels) endIntercepted(pol *Policy, ca *mitm.CA) map[string]int {
	if ca == nil || pol == nil || pol.Host == nil {
		return nil
	}
	l.mu.Lock()
	var ends []*liveTunnel
	for t := range l.set {
		if !t.pinned && pol.Host(t.host).Connect == ConnectMITM && ca.Covers(t.name) {
			ends = append(ends, t)
			delete(l.set, t)
		}
	}
	l.mu.Unlock()
	closed := map[string]int{}
	for _, t := range ends {
		t.client.Close()
		t.up.Close()
		closed[t.host]++
	}
	return closed
}

// endStale applies endIntercepted with the policy and CA in force, and
// says what it closed.
func (p *Proxy) endStale() {
	for host, n := range p.live.endIntercepted(p.policy.Load(), p.ca.Load()) {
		p.log.Warn("connect: closed passed-through tunnels to a host now intercepted: the app's next request comes through a new CONNECT and is paced",
			"host", host, "tunnels", n, "in_flight", "a request in flight on such a tunnel fails with a closed connection; the app may retry it")
	}
}

// ForwardStat counts the requests to one host that were not webhooks and
// went to it synchronously (requests, where TunnelStat counts tunnels).
type ForwardStat struct {
	Host  string    `json:"host"`
	Count int64     `json:"count"`
	Last  time.Time `json:"last"`
}

// forwardBook keeps a ForwardStat per host, bounded as the tunnel book.
type forwardBook struct {
	mu    sync.Mutex
	hosts map[string]*ForwardStat
}

func (b *forwardBook) add(host string, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.hosts == nil {
		b.hosts = map[string]*ForwardStat{}
	}
	s, ok := b.hosts[host]
	if !ok && len(b.hosts) >= maxTunnelHosts {
		host = otherTunnels
		s, ok = b.hosts[host]
	}
	if !ok {
		s = &ForwardStat{Host: host}
		b.hosts[host] = s
	}
	s.Count++
	s.Last = now
}

// Forwarded lists, by host, the requests forwarded since the start
// because no webhooks rule made them webhooks.
func (p *Proxy) Forwarded() []ForwardStat {
	b := &p.forwarded
	b.mu.Lock()
	out := make([]ForwardStat, 0, len(b.hosts))
	for _, s := range b.hosts {
		out = append(out, *s)
	}
	b.mu.Unlock()
	slices.SortFunc(out, func(a, b ForwardStat) int { return cmp.Compare(a.Host, b.Host) })
	return out
}
