// Package fleet shares each destination host's pacing between the
// replicas of a fleet through Redis: the token bucket (as GCRA), the
// concurrency cap (as leases that expire unless renewed), the 429 holding
// pattern and its escalation count, the adaptive rate, the paused state
// and the breaker's open state.
//
// Every send decision is one Lua script (ask.lua, run with EVALSHA and
// EVAL when the server does not know it yet) that applies the results of
// finished attempts, checks pause, hold and breaker, takes up to n tokens
// and n leases, and answers "go" (with lease ids) or "ask again in T". It
// is one script rather than github.com/go-redis/redis_rate because that
// package is a bucket alone: the hold, the lease and the token would be
// three round trips, and between them another replica could take the
// token of a held host or the slot of a token it already spent.
//
// The script reads the time from Redis (TIME) so that replicas whose
// clocks disagree still share one bucket, and every time it returns is
// relative ("in 120 ms"). Tests pass their own clock (Options.Now).
//
// Keys of one host share the hash tag {prefix:host}, so the script works
// on Redis Cluster, and they all expire: an idle host leaves nothing
// behind (a pause is kept for 30 days).
//
// When Redis errors or times out, the Limiter reports itself degraded: the
// caller then paces alone with its share of the limits (Share), never with
// all of them. A heartbeat keeps the count of live replicas and notices
// when Redis answers again. On a Redis Cluster only the hosts whose slots
// do not answer are degraded (slots.go).
package fleet

import (
	"cmp"
	"context"
	"crypto/tls"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed ask.lua
	askLua string
	//go:embed renew.lua
	renewLua string
	//go:embed heartbeat.lua
	heartbeatLua string
	//go:embed restore.lua
	restoreLua string

	askScript       = redis.NewScript(askLua)
	renewScript     = redis.NewScript(renewLua)
	heartbeatScript = redis.NewScript(heartbeatLua)
	restoreScript   = redis.NewScript(restoreLua)
)

// pauseTTL is how long a fleet-wide pause lasts if nobody resumes.
const pauseTTL = 30 * 24 * time.Hour

// Options configure a Limiter.
type Options struct {
	URL      string // redis:// or rediss://
	Password string // overrides the URL's password when set
	// Cluster, when set, names a Redis Cluster's seed nodes (host:port)
	// instead of URL; SentinelMaster and SentinelAddrs a Sentinel-managed
	// master. TLS turns on TLS for either (a URL says rediss://).
	Cluster        []string
	SentinelMaster string
	SentinelAddrs  []string
	TLS            bool

	KeyPrefix   string
	Replica     string        // unique per process; default hostname:pid
	Timeout     time.Duration // per Redis operation; default 250 ms
	LeasePeriod time.Duration // lease expiry without renewal; default 10 s
	Logger      *slog.Logger
	Observer    Observer
	// Now, when set, is the clock passed to the scripts instead of Redis's
	// own (tests).
	Now func() time.Time
}

// Observer receives fleet metrics; *telemetry.Metrics is the real one.
type Observer interface {
	FleetRoundTrip(op string, d time.Duration, err error)
	FleetFallback()
}

type noopObserver struct{}

func (noopObserver) FleetRoundTrip(string, time.Duration, error) {}
func (noopObserver) FleetFallback()                              {}

// Limiter is one replica's handle on the fleet's shared limits.
type Limiter struct {
	opts    Options
	rdb     redis.UniversalClient
	log     *slog.Logger
	obs     Observer
	leases  atomic.Uint64
	started atomic.Bool

	mu       sync.Mutex
	degraded bool
	lastErr  string
	live     int       // replicas seen by the last heartbeat, at least 1
	index    int       // this replica's index among them (0 to live-1), for its Share
	rejoinAt time.Time // degraded, Redis answers: back to shared limits by then at the latest (heartbeat.go)
	onChange []func()
	lostLog  time.Time           // the last "state lost" log line
	down     map[uint16]slotDown // Cluster slots that do not answer (slots.go)
	slotErr  string              // the last error a down slot gave
	// uncounted is how many attempts started on a share are out and not
	// counted in Redis (the gates'; nil: none).
	uncounted func() int

	mark   string        // its name in each host's state: a hash of Replica (recall.go)
	recall recall        // what this replica remembers of its hosts (recall.go)
	view   viewPublisher // what it published for the fleet's view (view.go)
	id     identity      // its spool's identity, for the fleet (spools.go)

	stop chan struct{}
	done chan struct{}
}

// New returns a Limiter for opts; it does not connect until used.
func New(opts Options) (*Limiter, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 250 * time.Millisecond
	}
	if opts.LeasePeriod <= 0 {
		opts.LeasePeriod = 10 * time.Second
	}
	if opts.Replica == "" {
		opts.Replica = DefaultReplica()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Observer == nil {
		opts.Observer = noopObserver{}
	}
	quietOnce.Do(func() { redis.SetLogger(debugLogger{}) })
	rdb, err := newClient(opts)
	if err != nil {
		return nil, err
	}
	return &Limiter{opts: opts, rdb: rdb, log: opts.Logger, obs: opts.Observer, live: 1, mark: markOf(opts.Replica),
		stop: make(chan struct{}), done: make(chan struct{})}, nil
}

// newClient is the client of one Redis (URL), a Redis Cluster (Cluster)
// or a Sentinel-managed master (SentinelMaster), all with the same
// timeouts: no retries (a retry would double the wait; the caller falls
// back instead) and RESP2 (the scripts' replies need nothing of RESP3, and
// go-redis then skips looking for push notifications around every reply,
// ~5 % of a replay's CPU to 1,000 hosts).
func newClient(opts Options) (redis.UniversalClient, error) {
	t := opts.Timeout
	var tlsConf *tls.Config
	if opts.TLS {
		tlsConf = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	switch {
	case len(opts.Cluster) > 0:
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: opts.Cluster, Password: opts.Password,
			DialTimeout: t, ReadTimeout: t, WriteTimeout: t, MaxRetries: -1, DialerRetries: 1,
			ContextTimeoutEnabled: true, Protocol: 2, TLSConfig: tlsConf}), nil
	case opts.SentinelMaster != "":
		return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: opts.SentinelMaster,
			SentinelAddrs: opts.SentinelAddrs, Password: opts.Password,
			DialTimeout: t, ReadTimeout: t, WriteTimeout: t, MaxRetries: -1, DialerRetries: 1,
			ContextTimeoutEnabled: true, Protocol: 2, TLSConfig: tlsConf}), nil
	}
	ro, err := redis.ParseURL(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("fleet.redis: %w", err)
	}
	if opts.Password != "" {
		ro.Password = opts.Password
	}
	ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout = t, t, t
	ro.MaxRetries = -1
	ro.DialerRetries = 1
	ro.ContextTimeoutEnabled = true
	if ro.Protocol == 0 {
		ro.Protocol = 2
	}
	return redis.NewClient(ro), nil
}

var quietOnce sync.Once

// debugLogger sends go-redis's own log lines (a failed dial, once per
// attempt) to slog at debug level: the limiter logs the outage once.
type debugLogger struct{}

func (debugLogger) Printf(ctx context.Context, format string, v ...any) {
	slog.Default().DebugContext(ctx, "redis: "+fmt.Sprintf(format, v...))
}

// DefaultReplica is the replica name used when none is configured.
func DefaultReplica() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "hookpace"
	}
	return h + ":" + strconv.Itoa(os.Getpid())
}

// Replica is this replica's name.
func (l *Limiter) Replica() string { return l.opts.Replica }

// LeasePeriod is how long a lease lasts without renewal.
func (l *Limiter) LeasePeriod() time.Duration { return l.opts.LeasePeriod }

func (l *Limiter) key(host, name string) string {
	return "{" + l.opts.KeyPrefix + ":" + host + "}:" + name
}

// now is the replica's clock (Options.Now in tests).
func (l *Limiter) now() time.Time {
	if l.opts.Now != nil {
		return l.opts.Now()
	}
	return time.Now()
}

// nowArg is the time passed to a script: "0" asks it to read Redis's.
func (l *Limiter) nowArg() string {
	if l.opts.Now == nil {
		return "0"
	}
	return strconv.FormatInt(l.opts.Now().UnixMicro(), 10)
}

func us(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) }

// run runs a script with the operation timeout, recording the round trip
// and falling back (degraded: the whole Limiter, or on a Cluster the keys'
// slot) on any error.
func (l *Limiter) run(ctx context.Context, op string, s *redis.Script, keys []string, args ...any) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	start := time.Now()
	v, err := s.Run(ctx, l.rdb, keys, args...).Result()
	l.obs.FleetRoundTrip(op, time.Since(start), err)
	if err != nil {
		err = fmt.Errorf("fleet %s: %w", op, err)
		l.failKeys(err, keys[:1])
	}
	return v, err
}

// scriptCall is one call of a script: its keys and arguments.
type scriptCall struct {
	keys []string
	args []any
}

// runEach runs the calls of one script in one pipeline (one round trip)
// with the operation timeout and returns their replies in order, each
// call's error (nil: its reply is in vals) and the first of them. Calls
// that found the script unknown to the server (NOSCRIPT: Redis restarted)
// are sent again with EVAL, in a second round trip. On one Redis any
// error makes the whole limiter degraded, as in run; on a Cluster, a
// failed call marks its slot down, the other calls' replies stand, and a
// call whose slot is already down is not sent (errSlotDown).
func (l *Limiter) runEach(ctx context.Context, op string, s *redis.Script, calls []scriptCall) (vals []any, errs []error, err error) {
	if len(calls) == 0 {
		return nil, nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	cmds, errs := make([]*redis.Cmd, len(calls)), make([]error, len(calls))
	l.skipDown(calls, errs)
	perr := l.pipeline(ctx, op, func(p redis.Pipeliner) {
		for i, c := range calls {
			if errs[i] == nil {
				cmds[i] = s.EvalSha(ctx, p, c.keys, c.args...)
			}
		}
	})
	if perr != nil && redis.HasErrorPrefix(perr, "NOSCRIPT") {
		l.pipeline(ctx, op, func(p redis.Pipeliner) {
			for i, c := range calls {
				if cmds[i] != nil && cmds[i].Err() != nil && redis.HasErrorPrefix(cmds[i].Err(), "NOSCRIPT") {
					cmds[i] = s.Eval(ctx, p, c.keys, c.args...)
				}
			}
		})
	}
	vals = make([]any, len(calls))
	var failed []string
	for i, c := range cmds {
		if c == nil {
			errs[i] = l.opErr(op, errs[i])
			err = cmp.Or(err, errs[i])
			continue
		}
		if errs[i] = l.opErr(op, c.Err()); errs[i] != nil {
			err = cmp.Or(err, errs[i])
			failed = append(failed, calls[i].keys[0])
		}
		vals[i] = c.Val()
	}
	if len(failed) > 0 {
		l.failKeys(err, failed)
	}
	return vals, errs, err
}

// skipDown sets errs[i] for the calls whose Cluster slot is down.
func (l *Limiter) skipDown(calls []scriptCall, errs []error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, c := range calls {
		if l.isDown(c.keys[0]) {
			errs[i] = errSlotDown
		}
	}
}

// opErr wraps a command's error with its operation (nil stays nil).
func (l *Limiter) opErr(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("fleet %s: timeout after %v: %w", op, l.opts.Timeout, err)
	}
	return fmt.Errorf("fleet %s: %w", op, err)
}

// pipeline sends the commands fill queues in one round trip and records
// it (a server that does not know the script yet answered, so NOSCRIPT is
// recorded as a success). Its error is the first command's that failed.
func (l *Limiter) pipeline(ctx context.Context, op string, fill func(redis.Pipeliner)) error {
	p := l.rdb.Pipeline()
	fill(p)
	start := time.Now()
	_, err := p.Exec(ctx)
	rec := err
	if rec != nil && redis.HasErrorPrefix(rec, "NOSCRIPT") {
		rec = nil
	}
	l.obs.FleetRoundTrip(op, time.Since(start), rec)
	return err
}

// fail switches to local shares, logging and counting it once per outage.
func (l *Limiter) fail(err error) {
	l.recall.failed(l.now())
	l.mu.Lock()
	was, returning := l.degraded, !l.rejoinAt.IsZero()
	l.degraded, l.lastErr, l.rejoinAt = true, err.Error(), time.Time{}
	live, fns := l.live, l.onChange
	l.mu.Unlock()
	if was {
		if returning { // away again: the hosts pace on their shares
			for _, fn := range fns {
				fn()
			}
		}
		return
	}
	l.obs.FleetFallback()
	msg := "fleet degraded: redis unreachable, pacing with a local share"
	var said redis.Error
	if errors.As(err, &said) && !errors.Is(err, redis.Nil) {
		// Redis answered, with an error of its own (OOM, READONLY, a
		// script's error...): say what it said, not that it is away.
		msg = "fleet degraded: redis answered with an error, pacing with a local share"
	}
	l.log.Warn(msg, "error", err.Error(), "share", fmt.Sprintf("1/%d", live))
	for _, fn := range fns {
		fn()
	}
}

// State reports whether the replica paces alone (degraded), the live
// replica count it knows, and why it is degraded. On a Cluster it is never
// degraded as a whole: see HostDegraded and SlotsDown.
func (l *Limiter) State() (degraded bool, live int, why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.degraded, l.live, l.lastErr
}

// ShareOf is what this replica's share is taken by: the live replicas it
// knows and its index among them (Share).
func (l *Limiter) ShareOf() (live, index int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.live, l.index
}

// Returning reports whether the replica paced alone and Redis answers
// again: until the fleet rejoins (heartbeat.go), it starts nothing on its
// shares, and has Redis count the attempts out on them.
func (l *Limiter) Returning() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.degraded && !l.rejoinAt.IsZero()
}

// countUncounted registers fn, which says how many attempts started on a
// share are out and not counted in Redis: the replica is back for the
// fleet's rejoin when there are none.
func (l *Limiter) countUncounted(fn func() int) {
	l.mu.Lock()
	l.uncounted = fn
	l.mu.Unlock()
}

func (l *Limiter) uncountedNow() int {
	l.mu.Lock()
	fn := l.uncounted
	l.mu.Unlock()
	if fn == nil {
		return 0
	}
	return fn()
}

// OnChange registers fn, called (without locks held) whenever the limiter
// becomes degraded or shared again, or the live count changes.
func (l *Limiter) OnChange(fn func()) {
	l.mu.Lock()
	l.onChange = append(l.onChange, fn)
	l.mu.Unlock()
}
