package fleet

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The fleet's view: each replica publishes a compact summary of its
// hosts to Redis with its heartbeat, and any replica merges those of the
// live replicas (View, viewread.go). A replica's summary is one sorted
// set, {prefix}:view:<replica>, whose members are "host\x00fields" at
// score 0, so that they sort by host and a page is one ZRANGE BYLEX per
// replica. The set expires two lease periods after the last heartbeat
// that published it; a replica that stops is left out of the view at
// once anyway (only live replicas are merged).
//
// Each heartbeat sends only what changed since the last (a member's
// fields changed: the old one removed, the new one added), so a replica
// with thousands of idle hosts writes nothing for them; when the set is
// found missing (Redis restarted, or it expired), the whole summary is
// sent again.

// HostSummary is what one replica publishes of one host.
type HostSummary struct {
	Host      string `json:"host"`
	Queued    int64  `json:"queued"`
	InFlight  int    `json:"in_flight"`
	Held      string `json:"held,omitempty"`    // the hold's reason while held
	Breaker   string `json:"breaker,omitempty"` // "open" or "half-open"; "" when closed
	Paused    bool   `json:"paused,omitempty"`
	Delivered int64  `json:"delivered"` // since the replica started
	Dead      int64  `json:"dead"`      // dead letters kept
}

// viewPublisher is a replica's side of the view: what it published last.
type viewPublisher struct {
	mu        sync.Mutex
	summarize func() []HostSummary
	published map[string]string // host -> member
	full      bool              // send the whole summary next time
	lost      int               // the Lost count published last
}

// Summarize registers fn, called at each heartbeat for this replica's
// summary of its hosts (those with anything to say), which it publishes
// for the fleet's view.
func (l *Limiter) Summarize(fn func() []HostSummary) {
	l.view.mu.Lock()
	l.view.summarize, l.view.full = fn, true
	l.view.mu.Unlock()
}

func (l *Limiter) viewKey(replica string) string {
	return "{" + l.opts.KeyPrefix + "}:view:" + replica
}

// member is s as a member of a view set: the host, a NUL (below any
// byte a host has, so that members sort by host), then its fields.
func (s HostSummary) member() string {
	var b strings.Builder
	b.WriteString(s.Host)
	b.WriteByte(0)
	b.WriteString(strconv.FormatInt(s.Queued, 10))
	for _, f := range []string{strconv.Itoa(s.InFlight), strconv.FormatInt(s.Delivered, 10),
		strconv.FormatInt(s.Dead, 10), b01(s.Paused), s.Breaker, s.Held} {
		b.WriteByte(0x1f)
		b.WriteString(f)
	}
	return b.String()
}

// parseMember undoes member.
func parseMember(m string) (HostSummary, bool) {
	host, rest, ok := strings.Cut(m, "\x00")
	f := strings.Split(rest, "\x1f")
	if !ok || len(f) < 7 {
		return HostSummary{}, false
	}
	s := HostSummary{Host: host, Paused: f[4] == "1", Breaker: f[5], Held: f[6]}
	s.Queued, _ = strconv.ParseInt(f[0], 10, 64)
	s.InFlight, _ = strconv.Atoi(f[1])
	s.Delivered, _ = strconv.ParseInt(f[2], 10, 64)
	s.Dead, _ = strconv.ParseInt(f[3], 10, 64)
	return s, true
}

// publishView sends what changed in this replica's summary since the
// last heartbeat (everything, the first time or when Redis lost it).
func (l *Limiter) publishView(ctx context.Context) error {
	l.view.mu.Lock()
	defer l.view.mu.Unlock()
	if l.view.summarize == nil {
		return nil
	}
	if err := l.publishLost(ctx); err != nil {
		return err
	}
	cur := make(map[string]string)
	for _, s := range l.view.summarize() {
		cur[s.Host] = s.member()
	}
	for range 2 {
		existed, err := l.sendView(ctx, cur)
		if err != nil {
			l.view.full = true
			return err
		}
		l.view.published = cur
		if existed || l.view.full {
			l.view.full = false
			return nil
		}
		l.view.full = true // the set was gone: send it whole
	}
	return nil
}

// lostKey is the hash of replica -> "times:unix seconds of the last" that
// each replica found a host's state lost (recall.go), kept a day.
func (l *Limiter) lostKey() string { return "{" + l.opts.KeyPrefix + "}:lost" }

// publishLost says, when it changed, how many times this replica found a
// host's state lost in Redis, for the fleet's view. Called with view.mu
// held.
func (l *Limiter) publishLost(ctx context.Context) error {
	n, last := l.Lost()
	if n == l.view.lost {
		return nil
	}
	err := l.cmd(ctx, "view", l.lostKey(), func(ctx context.Context) error {
		_, err := l.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.HSet(ctx, l.lostKey(), l.opts.Replica, strconv.Itoa(n)+":"+strconv.FormatInt(last.Unix(), 10))
			p.Expire(ctx, l.lostKey(), 24*time.Hour)
			return nil
		})
		return err
	})
	if err == nil {
		l.view.lost = n
	}
	return err
}

// sendView writes the difference between what was published and cur (or
// all of cur, when full) in one transaction, and reports whether the set
// existed before it.
func (l *Limiter) sendView(ctx context.Context, cur map[string]string) (existed bool, err error) {
	var gone []any
	var added []redis.Z
	old := l.view.published
	if l.view.full {
		old = nil
	}
	for h, m := range old {
		if cur[h] != m {
			gone = append(gone, m)
		}
	}
	for h, m := range cur {
		if old[h] != m {
			added = append(added, redis.Z{Member: m})
		}
	}
	key := l.viewKey(l.opts.Replica)
	var ex *redis.IntCmd
	err = l.cmd(ctx, "view", key, func(ctx context.Context) error {
		_, err := l.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			ex = p.Exists(ctx, key)
			if l.view.full {
				p.Del(ctx, key)
			}
			for i := 0; i < len(gone); i += 500 {
				p.ZRem(ctx, key, gone[i:min(i+500, len(gone))]...)
			}
			for i := 0; i < len(added); i += 500 {
				p.ZAdd(ctx, key, added[i:min(i+500, len(added))]...)
			}
			p.PExpire(ctx, key, 2*l.opts.LeasePeriod)
			return nil
		})
		return err
	})
	if err != nil {
		return false, err
	}
	return ex.Val() == 1, nil
}
