package egress

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Swap is the egress policy in force: a reload swaps in a new Guard (Set).
// A keep-alive connection, once dialled, carries request after request
// without the dialer's check, so Swap also answers, per attempt, whether
// the policy in force admits the destination (Refusal, Checked), and a
// change of the lists closes the idle connections of the transports it
// tracks.
type Swap struct {
	g    atomic.Pointer[Guard]
	self []string
	apps []string // Options.Apps, set once at start (Inbound)

	verdicts *Verdicts // of the policy in force

	mu          sync.Mutex
	transports  []*http.Transport // their idle connections close on a policy change
	allow, deny []string          // the lists in force
}

// NewSwap builds the policy of allow and deny; self are hookpace's own
// listener addresses, never a destination (Options.Self).
func NewSwap(allow, deny []string, self ...string) (*Swap, error) {
	s := &Swap{self: self, verdicts: NewVerdicts(verdictTTL, 10000)}
	if err := s.Set(allow, deny); err != nil {
		return nil, err
	}
	return s, nil
}

// Set puts the policy of allow and deny in force. If either list changed,
// the tracked transports' idle connections are closed.
func (s *Swap) Set(allow, deny []string) error {
	g, err := New(Options{Allow: allow, Deny: deny, Self: s.self, Apps: s.apps})
	if err != nil {
		return err
	}
	s.g.Store(g)
	s.verdicts.Reset()
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := !slices.Equal(s.allow, allow) || !slices.Equal(s.deny, deny)
	s.allow, s.deny = allow, deny
	if changed {
		for _, tr := range s.transports {
			tr.CloseIdleConnections()
		}
	}
	return nil
}

// Inbound adds the inbound routes' listeners to hookpace's own (Self)
// and opens their apps (Options.Apps), under the lists in force. It is
// called once, at start, once the listeners are bound and before any
// request is served.
func (s *Swap) Inbound(listeners, apps []string) error {
	s.mu.Lock()
	s.self = append(slices.Clip(s.self), listeners...)
	s.apps = apps
	allow, deny := s.allow, s.deny
	s.mu.Unlock()
	return s.Set(allow, deny)
}

// Track makes a policy change close tr's idle connections.
func (s *Swap) Track(tr *http.Transport) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.transports = append(s.transports, tr)
}

// CheckPort is Guard.CheckPort under the policy in force.
func (s *Swap) CheckPort(ctx context.Context, host string, port uint16) ([]netip.Addr, error) {
	return s.g.Load().CheckPort(ctx, host, port)
}

// DialContext is Guard.DialContext under the policy in force.
func (s *Swap) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return s.g.Load().DialContext(ctx, network, addr)
}

// verdictTTL is how long one answer of the policy serves the attempts to
// a destination: a name is resolved at most once per TTL. A policy change
// starts afresh.
const verdictTTL = 5 * time.Second

// Refusal is the verdict of the policy in force on host:port for one
// attempt: a *DeniedError, or nil. An error that is not a verdict (a name
// that does not resolve) is left to the dial.
func (s *Swap) Refusal(ctx context.Context, host string, port uint16) error {
	if err := s.verdicts.Check(ctx, host, port, s.CheckPort); IsDenied(err) {
		return err
	}
	return nil
}

// Checked is a RoundTripper that asks the policy in force before each
// request, so that a pooled connection never outlives the policy.
type Checked struct {
	Policy *Swap
	Next   http.RoundTripper
}

func (t Checked) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := t.Policy.Refusal(r.Context(), r.URL.Hostname(), urlPort(r)); err != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, err
	}
	return t.Next.RoundTrip(r)
}

func urlPort(r *http.Request) uint16 {
	if p, err := strconv.ParseUint(r.URL.Port(), 10, 16); err == nil {
		return uint16(p)
	}
	if r.URL.Scheme == "https" {
		return 443
	}
	return 80
}
