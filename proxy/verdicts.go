package proxy

import (
	"context"
	"sync"
	"time"
)

// verdictCache remembers, for a few seconds, whether egress policy admits a
// destination, so that a stream of webhooks to one host costs one DNS
// resolution rather than one each. It only affects the answer at ingest:
// delivery checks the destination again when it dials.
type verdictCache struct {
	guard Guard
	ttl   time.Duration
	max   int

	mu sync.Mutex
	m  map[verdictKey]verdict
}

type verdictKey struct {
	host string
	port uint16
}

type verdict struct {
	err     error // nil: admitted; else the refusal
	expires time.Time
}

func newVerdictCache(g Guard, ttl time.Duration, max int) *verdictCache {
	return &verdictCache{guard: g, ttl: ttl, max: max, m: make(map[verdictKey]verdict)}
}

// check returns the guard's verdict for host:port, from the cache while it
// is fresh. Resolution failures are not cached: they may pass.
func (c *verdictCache) check(ctx context.Context, host string, port uint16, refused func(error) bool) error {
	k := verdictKey{host, port}
	now := time.Now()
	c.mu.Lock()
	v, ok := c.m[k]
	c.mu.Unlock()
	if ok && now.Before(v.expires) {
		return v.err
	}
	_, err := c.guard.CheckPort(ctx, host, port)
	if err != nil && !refused(err) {
		return err
	}
	c.mu.Lock()
	if len(c.m) >= c.max {
		// Full: drop everything rather than track ages; it refills at the
		// rate of distinct hosts.
		clear(c.m)
	}
	c.m[k] = verdict{err: err, expires: now.Add(c.ttl)}
	c.mu.Unlock()
	return err
}

// reset forgets every verdict (the egress policy changed).
func (c *verdictCache) reset() {
	c.mu.Lock()
	clear(c.m)
	c.mu.Unlock()
}
