package server

import (
	"context"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/handoff"
	"github.com/hookpace/hookpace/pacer"
	"github.com/hookpace/hookpace/spool"
)

// stoppingRetryAfter is the Retry-After of the 503 that new webhooks get
// once hookpace is shutting down: by then its app has normally stopped,
// and a client behind a Service reaches another replica.
const stoppingRetryAfter = 5 * time.Second

// drainPoll is how often the drain looks whether the queue is empty.
const drainPoll = 50 * time.Millisecond

// drain lets the dispatcher go on, paced and held as usual, until the
// queue is empty, the time is until, or no host with webhooks left can
// send one before until, then logs what it did and why it ended. New
// webhooks get 503 meanwhile, so the queue only shrinks.
func (a *app) drain(until time.Time, before spool.Usage) {
	start := time.Now()
	t := time.NewTicker(drainPoll)
	defer t.Stop()
	why := "time up"
	for time.Now().Before(until) {
		queued := a.spool.Usage().Messages
		if queued == 0 {
			why = "queue empty"
			break
		}
		if stuck(a.disp.Hosts(), queued, until) {
			why = "nothing can be sent before the drain ends (paused, held or breaker open)"
			break
		}
		<-t.C
	}
	after := a.spool.Usage()
	dead := after.Dead - before.Dead
	a.log.Info("drain ended", "why", why, "delivered", before.Messages-after.Messages-dead, "dead_lettered", dead,
		"remaining", after.Messages, "took_ms", time.Since(start).Milliseconds())
}

// stuck says whether every host with webhooks queued or in flight is
// paused, held past until (a 429, a quota, a name that does not resolve)
// or has an open breaker whose probe is due after until: waiting for
// those would only delay the exit. A host waiting for a token or a retry's
// backoff is not stuck, nor are webhooks (of queued in the spool) that no
// host accounts for.
func stuck(hosts []deliver.HostStatus, queued int64, until time.Time) bool {
	for _, h := range hosts {
		queued -= h.Queued
		switch {
		case h.Queued == 0 && h.InFlight == 0:
		case h.Paused:
		case h.HeldUntil != nil && !h.HeldUntil.Before(until):
		case h.Breaker == "open" && h.BreakerProbeAt != nil && !h.BreakerProbeAt.Before(until):
		default:
			return false
		}
	}
	return queued <= 0
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
	files := a.files.Load()
	a.log.Info("handoff started", "target", redacted(sh.Handoff), "queued", u.Messages,
		"dead_letters", u.Dead, "signed", files.HandoffSecret != nil,
		"note", "dead letters are not handed off: hookpace dead export keeps them")
	if files.HandoffSecret == nil {
		a.log.Warn("handoff unsigned: without shutdown.handoff_secret_file the other hookpace gives the webhooks new ids "+
			"(or, with a secret of its own, refuses them)", "target", redacted(sh.Handoff))
	}
	states := a.hostStates()
	if len(states) > 0 && files.HandoffSecret == nil {
		a.log.Warn("handoff: pauses and holds stay here: without shutdown.handoff_secret_file the other hookpace "+
			"cannot trust them, and delivers those hosts' webhooks at once", "hosts", len(states))
	}
	res, err := handoff.Run(ctx, handoff.Options{Target: sh.Handoff, Auth: files.HandoffAuth, Secret: files.HandoffSecret, From: from,
		Hosts: states, Queue: a.spool, Logger: a.log})
	defer a.handoffEnded(ctx, sh, res, err)
	if err != nil {
		a.log.Error("handoff failed", "error", err, "handed_off", res.HandedOff)
		return
	}
	attrs := []any{"handed_off", res.HandedOff, "left", res.Left, "retried", res.Retried, "took_ms", res.Took.Milliseconds(),
		"per_second", int(res.Rate()), "ordering_keys", res.Keys, "ordering_keys_kept", res.KeysKept, "ordering_keys_split", res.KeysSplit}
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

// hostStates are the pauses and the holds still running that a hand-off
// carries: the dispatcher's (it has stopped; its state stays), and the
// pauses recorded in the spool.
func (a *app) hostStates() map[string]handoff.HostState {
	out := map[string]handoff.HostState{}
	now := time.Now()
	for _, h := range a.disp.Hosts() {
		var st handoff.HostState
		if h.Paused {
			st.PausedBy = h.PausedWhy
		}
		if h.HeldUntil != nil && h.HeldUntil.After(now) && carriedHold(h.HoldReason) {
			st.HeldUntil, st.HoldReason = *h.HeldUntil, h.HoldReason
		}
		if !st.Empty() {
			out[h.Host] = st
		}
	}
	paused, err := a.spool.Paused()
	if err != nil {
		a.log.Warn("handoff: the pauses recorded in the spool could not be read; those the dispatcher knows travel", "error", err)
	}
	for _, h := range paused {
		if st := out[h]; st.PausedBy == "" {
			st.PausedBy = deliver.PausedByOperator
			out[h] = st
		}
	}
	return out
}

// carriedHold says whether a hold with this reason travels with a
// hand-off: a partner's 429 or used-up quota ("paused" hides which hold
// a paused host has). A name that does not resolve is the other
// hookpace's to find out.
func carriedHold(reason string) bool {
	return strings.HasPrefix(reason, "429") || reason == pacer.HoldQuota || reason == "paused"
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
