package deliver

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hookpace/hookpace/pacer"
	"github.com/hookpace/hookpace/partnerlimit"
)

// Partner limits (Policy.PartnerLimits): what a partner says of
// its own limits in its answers paces the host before any 429.
//
//   - A quota (RateLimit r=, X-RateLimit-Remaining) with nothing left
//     beyond the attempts in flight holds the host until the reset: a hold
//     shown as "quota", where no message fails or retries.
//   - A policy (RateLimit-Policy q=;w=) below the host's configured rate
//     caps it at q/w with a burst of at most q: the learned limit. It
//     never raises the rate, and lapses after PartnerLimitsTTL without
//     being said again.
//
// A 429 holds the host and feeds AIMD as before; its Retry-After wins over
// these headers, whose reset is used only for a 429 that gives none.
//
// On the delivery path, an answer without these headers costs a few
// header-map lookups (partnerlimit.Present), and each send one zero-time check in
// the pacer: the replay bench showed no difference (see the commit).

// learned is a limit a partner stated, in force until until.
type learned struct {
	rate  float64
	burst int
	from  string // the header it was read from
	until time.Time
}

func (l *learned) String() string {
	return "learned " + strconv.FormatFloat(l.rate, 'g', 4, 64) + "/s from " + l.from
}

// limits is h's policy limits under its learned limit: the configured
// rate, then the learned one (the adaptive rate and holds are the pacer's).
func (h *host) limits() pacer.Limits {
	l := h.pol.Limits
	if h.learn != nil && h.learn.rate < l.Rate {
		l.Rate = h.learn.rate
		l.Burst = max(min(l.Burst, h.learn.burst), 1)
		l.MinRate = min(l.MinRate, l.Rate)
	}
	return l
}

// partnerReset is the reset of a quota used up, used as the Retry-After of
// a 429 that gives none. A quota not used up says nothing of this 429.
func partnerReset(in *partnerlimit.Info) (time.Duration, bool) {
	if in == nil || !in.HasQuota || in.Remaining > 0 || !in.HasReset || in.Reset <= 0 {
		return 0, false
	}
	return in.Reset, true
}

// partnerLocked applies what an answer said of the partner's limits. It
// returns when a quota hold ends, zero if the answer held nothing.
func (d *Dispatcher) partnerLocked(h *host, pol *Policy, in *partnerlimit.Info, v verdict, now time.Time) time.Time {
	if in == nil || !pol.PartnerLimits {
		return time.Time{}
	}
	if len(in.Problems) > 0 {
		d.partnerProblems(h, in.Problems, now)
	}
	if in.HasPolicy {
		d.learnLocked(h, pol, in, now)
	}
	if !in.HasQuota || !in.HasReset || v == vHold {
		return time.Time{} // a 429 is held by its own rules
	}
	if !h.gate.Quota(now, in.Remaining, now.Add(in.Reset)) {
		return time.Time{}
	}
	return h.gate.State(now).HeldUntil
}

// learnLocked applies a stated policy: a cap below the configured rate,
// logged when it starts or changes, or the end of one the partner raised.
func (d *Dispatcher) learnLocked(h *host, pol *Policy, in *partnerlimit.Info, now time.Time) {
	rate := in.Rate()
	ttl := pol.PartnerLimitsTTL
	if ttl <= 0 {
		ttl = 10 * time.Minute
	}
	if rate >= pol.Limits.Rate {
		if h.learn != nil {
			d.log.Info("partner limit lifted", "host", h.name, "stated_rate", rate, "from", in.PolicyFrom,
				"configured_rate", pol.Limits.Rate)
			d.unlearnLocked(h, now)
		}
		return
	}
	l := &learned{rate: rate, burst: int(min(in.Burst, int64(pacer.BurstMax))), from: in.PolicyFrom, until: now.Add(ttl)}
	if old := h.learn; old != nil && old.rate == l.rate && old.burst == l.burst && old.from == l.from {
		old.until = l.until
		return
	}
	h.learn = l
	lim := h.limits()
	d.log.Info("partner limit learned", "host", h.name, "limit", l.String(), "rate", lim.Rate, "burst", lim.Burst,
		"policy", fmt.Sprintf("%d per %s", in.Limit, in.Window), "configured_rate", pol.Limits.Rate, "ttl", ttl.String())
	d.relimitLocked(h, now)
}

// unlearnLocked drops h's learned limit.
func (d *Dispatcher) unlearnLocked(h *host, now time.Time) {
	h.learn = nil
	d.relimitLocked(h, now)
}

// expireLocked drops a learned limit not said again in its time.
func (d *Dispatcher) expireLocked(h *host, now time.Time) {
	if h.learn != nil && !now.Before(h.learn.until) {
		d.log.Info("partner limit expired", "host", h.name, "limit", h.learn.String())
		d.unlearnLocked(h, now)
	}
}

// relimitLocked gives h's pacer its limits anew; a pending wake was
// computed at the old rate.
func (d *Dispatcher) relimitLocked(h *host, now time.Time) {
	h.gate.SetLimits(h.limits(), now)
	h.win.Unspill() // the gate may let it send sooner
	if h.timer != nil {
		h.timer.Stop()
		h.wakeAt = time.Time{}
	}
}

// partnerProblems logs values of the partner's headers that were left out
// or capped, throttled per host.
func (d *Dispatcher) partnerProblems(h *host, problems []string, now time.Time) {
	attrs := []any{"host", h.name, "problems", strings.Join(problems, "; ")}
	if d.opts.Throttle != nil {
		ok, suppressed := d.opts.Throttle.Allow(h.name+"|partner limits", now)
		if !ok {
			return
		}
		if suppressed > 0 {
			attrs = append(attrs, "suppressed", suppressed)
		}
	}
	d.log.Warn("partner rate limit headers ignored or capped", attrs...)
}
