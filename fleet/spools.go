package fleet

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A webhook's id names the spool that accepted it (spool.Ref), so any
// replica can tell which one to ask about an id that is not its own: each
// replica publishes, with its heartbeat, its spool's identity, its name
// and its admin API's address to one hash of the fleet ({prefix}:spools,
// a field per spool). A replica that stopped stays there, with when it was
// last seen, so that an id of a replica gone (and its hand-off) can still
// be told; the hash expires spoolsTTL after the last write, and each
// replica writes its field when it starts and every spoolsEvery.

const (
	spoolsTTL   = 30 * 24 * time.Hour
	spoolsEvery = time.Minute
)

// Owner is what the fleet knows of the replica whose spool accepted a
// webhook.
type Owner struct {
	Replica string    `json:"replica"`
	Admin   string    `json:"admin,omitempty"` // its admin API's listen address, as it sees it
	SeenAt  time.Time `json:"seen_at"`         // when it last said so
	Live    bool      `json:"live"`            // its heartbeat has not expired
}

// identity is this replica's entry in the spools hash, guarded by the
// limiter's mutex.
type identity struct {
	spool  string // 16 hex digits; "" until Identify
	admin  string
	sentAt time.Time // the last write (zero: to do)
}

// Identify sets the identity this replica publishes: its spool's (the
// spool part of the ids it gives) and its admin API's address. The next
// heartbeat publishes it.
func (l *Limiter) Identify(spool uint64, admin string) {
	s := strconv.FormatUint(spool, 16)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.id = identity{spool: strings.Repeat("0", 16-len(s)) + s, admin: admin}
}

func (l *Limiter) spoolsKey() string { return "{" + l.opts.KeyPrefix + "}:spools" }

// publishIdentity writes this replica's entry when it is due.
func (l *Limiter) publishIdentity(ctx context.Context) {
	now := time.Now()
	l.mu.Lock()
	id := l.id
	l.mu.Unlock()
	if id.spool == "" || !id.sentAt.IsZero() && now.Sub(id.sentAt) < spoolsEvery {
		return
	}
	v := l.opts.Replica + "\x00" + id.admin + "\x00" + strconv.FormatInt(now.Unix(), 10)
	err := l.cmd(ctx, "identity", l.spoolsKey(), func(ctx context.Context) error {
		_, err := l.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.HSet(ctx, l.spoolsKey(), id.spool, v)
			p.Expire(ctx, l.spoolsKey(), spoolsTTL)
			return nil
		})
		return err
	})
	if err != nil {
		return
	}
	l.mu.Lock()
	if l.id.spool == id.spool {
		l.id.sentAt = now
	}
	l.mu.Unlock()
}

// SpoolOwner says which replica's spool is spool (the spool part of a
// webhook's id), whether it is live, and its admin address; false when
// no replica of the fleet published it (or it expired).
func (l *Limiter) SpoolOwner(ctx context.Context, spool uint64) (Owner, bool, error) {
	s := strconv.FormatUint(spool, 16)
	field := strings.Repeat("0", 16-len(s)) + s
	var v string
	err := l.cmd(ctx, "spool_owner", "", func(ctx context.Context) error {
		var err error
		if v, err = l.rdb.HGet(ctx, l.spoolsKey(), field).Result(); errors.Is(err, redis.Nil) {
			return nil // not published: v is ""
		}
		return err
	})
	if err != nil || v == "" {
		return Owner{}, false, err
	}
	parts := strings.SplitN(v, "\x00", 3)
	if len(parts) != 3 {
		return Owner{}, false, nil
	}
	o := Owner{Replica: parts[0], Admin: parts[1]}
	if sec, err := strconv.ParseInt(parts[2], 10, 64); err == nil {
		o.SeenAt = time.Unix(sec, 0).UTC()
	}
	live, err := l.liveReplicas(ctx)
	if err != nil {
		return o, true, err
	}
	for _, r := range live {
		o.Live = o.Live || r == o.Replica
	}
	return o, true, nil
}
