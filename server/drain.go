package server

import (
	"context"
	"net/url"
	"os"
	"sort"
	"time"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/handoff"
	"github.com/hookpace/hookpace/spool"
)

// stoppingRetryAfter is the Retry-After of the 503 that new webhooks get
// once hookpace is shutting down: by then its app has normally stopped,
// and a client behind a Service reaches another replica.
const stoppingRetryAfter = 5 * time.Second

// drainPoll is how often the drain looks whether the queue is empty.
const drainPoll = 50 * time.Millisecond

// drain lets the dispatcher go on, paced and held as usual, until the
// queue is empty or the time is until, then logs what it did. New webhooks get 503
// meanwhile, so the queue only shrinks.
func (a *app) drain(until time.Time, before spool.Usage) {
	start := time.Now()
	t := time.NewTicker(drainPoll)
	defer t.Stop()
	for a.spool.Usage().Messages > 0 && time.Now().Before(until) {
		<-t.C
	}
	after := a.spool.Usage()
	dead := after.Dead - before.Dead
	a.log.Info("drain ended", "delivered", before.Messages-after.Messages-dead, "dead_lettered", dead,
		"remaining", after.Messages, "took_ms", time.Since(start).Milliseconds())
}

// handoff sends what is still queued to sh.Handoff (see package handoff)
// and logs what it did.
func (a *app) handoff(ctx context.Context, sh config.ShutdownConfig) {
	u := a.spool.Usage()
	if u.Messages == 0 {
		a.log.Info("handoff: nothing left to hand off", "dead_letters", u.Dead)
		return
	}
	from, _ := os.Hostname()
	a.log.Info("handoff started", "target", redacted(sh.Handoff), "queued", u.Messages,
		"dead_letters", u.Dead, "note", "dead letters are not handed off: hookpace dead export keeps them")
	res, err := handoff.Run(ctx, handoff.Options{Target: sh.Handoff, AuthFile: sh.HandoffAuth, From: from,
		Queue: a.spool, Logger: a.log})
	if err != nil {
		a.log.Error("handoff failed", "error", err, "handed_off", res.HandedOff)
		return
	}
	attrs := []any{"handed_off", res.HandedOff, "left", res.Left, "took_ms", res.Took.Milliseconds(),
		"per_second", int(res.Rate())}
	reasons := make([]string, 0, len(res.Kept))
	for r := range res.Kept {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		attrs = append(attrs, "kept_"+r, res.Kept[r])
	}
	a.log.Info("handoff ended", attrs...)
}

// redacted hides the password of a URL with credentials.
func redacted(s string) string {
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable)"
	}
	return u.Redacted()
}
