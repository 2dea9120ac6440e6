package server

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/egress"
)

// A keep-alive connection, once dialled, carries request after request
// without the dialer's egress check. So the policy in force is also asked
// before every delivery attempt (checkedTransport), and a policy change
// closes the idle pooled connections (swapGuard.set).

// verdictTTL is how long one answer of the policy serves the attempts to
// a destination: a name is resolved at most once per TTL. A reload starts
// afresh.
const verdictTTL = 5 * time.Second

// attemptVerdicts caches the refusals and admissions of one egress.Guard.
type attemptVerdicts struct {
	mu sync.Mutex
	g  *egress.Guard // the guard the entries came from
	m  map[verdictKey]attemptVerdict
}

type verdictKey struct {
	host string
	port uint16
}

type attemptVerdict struct {
	err     error // nil: admitted; else the refusal
	expires time.Time
}

// Refusal is the policy's verdict on host:port for one attempt: a
// deliver.Refusal, or nil. An error that is not a verdict (a name that does
// not resolve) is left to the dial.
func (s *swapGuard) Refusal(ctx context.Context, host string, port uint16) error {
	g := s.g.Load()
	k, now := verdictKey{host, port}, time.Now()
	av := &s.verdicts
	av.mu.Lock()
	if av.g != g {
		av.g, av.m = g, make(map[verdictKey]attemptVerdict)
	}
	v, ok := av.m[k]
	av.mu.Unlock()
	if ok && now.Before(v.expires) {
		return v.err
	}
	_, err := g.CheckPort(ctx, host, port)
	var ref deliver.Refusal
	if err != nil && !errors.As(err, &ref) {
		return nil
	}
	av.mu.Lock()
	if av.g == g {
		if len(av.m) >= 10000 {
			clear(av.m) // refills at the rate of distinct destinations
		}
		av.m[k] = attemptVerdict{err: err, expires: now.Add(verdictTTL)}
	}
	av.mu.Unlock()
	return err
}

// track makes a policy change close tr's idle connections.
func (s *swapGuard) track(tr *http.Transport) {
	s.mu.Lock()
	s.transports = append(s.transports, tr)
	s.mu.Unlock()
}

// policyChanged closes the idle connections of every tracked transport if
// the allow or deny list differs between old and new.
func (s *swapGuard) policyChanged(oldAllow, oldDeny, allow, deny []string) {
	if slices.Equal(oldAllow, allow) && slices.Equal(oldDeny, deny) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tr := range s.transports {
		tr.CloseIdleConnections()
	}
}

// checkedTransport asks the egress policy in force before each request.
type checkedTransport struct {
	guard *swapGuard
	next  http.RoundTripper
}

func (t checkedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := t.guard.Refusal(r.Context(), r.URL.Hostname(), urlPort(r)); err != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, err
	}
	return t.next.RoundTrip(r)
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
