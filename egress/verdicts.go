package egress

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Verdicts remembers, for a while, what the policy said of destinations,
// so that a stream of requests to one host costs one DNS resolution
// rather than one each. It remembers verdicts (admitted, or a
// *DeniedError) and, as briefly, that a name did not resolve (any other
// error), so that a name in a DNS outage is not asked again per request.
//
// Every entry lives for the TTL: net.Resolver does not give the answer's
// own TTL, so it is a short fixed one. Known decides without waiting on
// the network (the door); Check waits for an answer (delivery, which
// resolves to dial anyway).
type Verdicts struct {
	ttl time.Duration
	max int
	// grace is how long Known waits for a name seen for the first time:
	// an answer from /etc/hosts or a warm resolver cache comes well within
	// it, a lost packet or a dead resolver does not hold the request.
	grace time.Duration
	// timeout bounds one resolution that Known started.
	timeout time.Duration
	// maxLookups bounds the resolutions Known runs at once; past it, a
	// name is decided at delivery.
	maxLookups int

	mu       sync.Mutex
	m        map[verdictKey]verdict
	inflight map[verdictKey]*lookup
	gen      uint64 // raised by Reset: an answer asked before it is not kept
}

type verdictKey struct {
	host string
	port uint16
}

type verdict struct {
	err error // nil: admitted; a *DeniedError: refused; else: did not resolve
	// expires is when the entry stops counting; refreshAt, before it, is
	// when Known starts asking again, so that a steady stream of requests
	// to a host always finds a fresh answer.
	expires, refreshAt time.Time
}

// lookup is one resolution in flight: callers wait on done for err,
// each until the grace after its start at most.
type lookup struct {
	done  chan struct{}
	start time.Time
	err   error
}

// Defaults of Known's waiting.
const (
	knownGrace      = 5 * time.Millisecond
	knownTimeout    = 10 * time.Second
	knownMaxLookups = 64
)

// NewVerdicts remembers each answer for ttl, and at most max of them:
// once full, it forgets them all and refills at the rate of distinct
// destinations (cheaper than tracking ages).
func NewVerdicts(ttl time.Duration, max int) *Verdicts {
	return &Verdicts{ttl: ttl, max: max, grace: knownGrace, timeout: knownTimeout, maxLookups: knownMaxLookups,
		m: make(map[verdictKey]verdict), inflight: make(map[verdictKey]*lookup)}
}

// Ask resolves host and applies the policy to host:port: Guard.CheckPort.
type Ask func(ctx context.Context, host string, port uint16) ([]netip.Addr, error)

// Check returns the answer on host:port: the one remembered while it is
// fresh, else ask's. A name that does not resolve is remembered as such
// for the TTL, and its error returned.
func (v *Verdicts) Check(ctx context.Context, host string, port uint16, ask Ask) error {
	k, now := verdictKey{host, port}, time.Now()
	v.mu.Lock()
	old, ok := v.m[k]
	gen := v.gen
	v.mu.Unlock()
	if ok && now.Before(old.expires) {
		return old.err
	}
	_, err := ask(ctx, host, port)
	if ctx.Err() == nil {
		v.store(k, gen, err, now)
	}
	return err
}

// Known returns the refusal of host:port if the policy's answer is known
// to be one, and nil otherwise: admitted, not resolving, or not known yet.
// It never waits on the network beyond a short grace for a name it sees
// for the first time; an answer not come by then is looked up in the
// background and serves the next requests. An IP literal and a localhost
// name are decided at once: ask does not need the network for them.
// What Known admits without an answer, delivery checks when it dials.
func (v *Verdicts) Known(host string, port uint16, ask Ask) error {
	if local(host) {
		_, err := ask(context.Background(), host, port)
		if IsDenied(err) {
			return err
		}
		return nil
	}
	k, now := verdictKey{host, port}, time.Now()
	v.mu.Lock()
	old, ok := v.m[k]
	var l *lookup
	if !ok || !now.Before(old.refreshAt) {
		l = v.startLocked(k, ask)
	}
	v.mu.Unlock()
	if ok && now.Before(old.expires) {
		return refusal(old.err)
	}
	if l == nil {
		return nil
	}
	wait := l.start.Add(v.grace).Sub(now)
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-l.done:
		return refusal(l.err)
	case <-t.C:
		return nil
	}
}

// startLocked starts a lookup of k unless one is in flight (it is
// returned) or too many are (nil). v.mu is held.
func (v *Verdicts) startLocked(k verdictKey, ask Ask) *lookup {
	if l := v.inflight[k]; l != nil {
		return l
	}
	if len(v.inflight) >= v.maxLookups {
		return nil
	}
	l := &lookup{done: make(chan struct{}), start: time.Now()}
	v.inflight[k] = l
	gen := v.gen
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), v.timeout)
		defer cancel()
		_, l.err = ask(ctx, k.host, k.port)
		v.store(k, gen, l.err, l.start)
		v.mu.Lock()
		if v.inflight[k] == l {
			delete(v.inflight, k)
		}
		v.mu.Unlock()
		close(l.done)
	}()
	return l
}

// store remembers the answer asked at asked, unless a Reset came since.
func (v *Verdicts) store(k verdictKey, gen uint64, err error, asked time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.gen != gen {
		return
	}
	if len(v.m) >= v.max {
		clear(v.m)
	}
	v.m[k] = verdict{err: err, expires: asked.Add(v.ttl), refreshAt: asked.Add(v.ttl * 4 / 5)}
}

// Reset forgets every answer (the policy changed); lookups in flight are
// not kept.
func (v *Verdicts) Reset() {
	v.mu.Lock()
	defer v.mu.Unlock()
	clear(v.m)
	clear(v.inflight)
	v.gen++
}

// refusal is err if it is a refusal, else nil.
func refusal(err error) error {
	if IsDenied(err) {
		return err
	}
	return nil
}

// local reports whether host is an IP literal or a localhost name (RFC
// 6761: always loopback), which a Guard decides without a DNS query.
func local(host string) bool {
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	return h == "localhost" || strings.HasSuffix(h, ".localhost")
}
