package egress

import (
	"context"
	"net/netip"
	"sync"
	"time"
)

// Verdicts remembers, for a while, what the policy said of destinations,
// so that a stream of requests to one host costs one DNS resolution
// rather than one each. Only verdicts are remembered: admitted (nil) or a
// *DeniedError. Another error (a name that does not resolve) is returned
// and asked again the next time.
type Verdicts struct {
	ttl time.Duration
	max int

	mu  sync.Mutex
	m   map[verdictKey]verdict
	gen uint64 // raised by Reset: an answer asked before it is not kept
}

type verdictKey struct {
	host string
	port uint16
}

type verdict struct {
	err     error // nil: admitted; else the refusal
	expires time.Time
}

// NewVerdicts remembers each verdict for ttl, and at most max of them:
// once full, it forgets them all and refills at the rate of distinct
// destinations (cheaper than tracking ages).
func NewVerdicts(ttl time.Duration, max int) *Verdicts {
	return &Verdicts{ttl: ttl, max: max, m: make(map[verdictKey]verdict)}
}

// Check returns the verdict on host:port: the one remembered while it is
// fresh, else ask's.
func (v *Verdicts) Check(ctx context.Context, host string, port uint16,
	ask func(ctx context.Context, host string, port uint16) ([]netip.Addr, error)) error {
	k, now := verdictKey{host, port}, time.Now()
	v.mu.Lock()
	old, ok := v.m[k]
	gen := v.gen
	v.mu.Unlock()
	if ok && now.Before(old.expires) {
		return old.err
	}
	_, err := ask(ctx, host, port)
	if err != nil && !IsDenied(err) {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.gen == gen {
		if len(v.m) >= v.max {
			clear(v.m)
		}
		v.m[k] = verdict{err: err, expires: now.Add(v.ttl)}
	}
	return err
}

// Reset forgets every verdict (the policy changed).
func (v *Verdicts) Reset() {
	v.mu.Lock()
	defer v.mu.Unlock()
	clear(v.m)
	v.gen++
}
