package deliver

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/hookpace/hookpace/credential"
	"github.com/hookpace/hookpace/pacer"
)

// HostStatus is what operators see of one host (GET /v1/hosts).
type HostStatus struct {
	Host           string     `json:"host"`
	Queued         int64      `json:"queued"`
	QueuedBytes    int64      `json:"queued_bytes"`
	InFlight       int        `json:"in_flight"`
	Retrying       int        `json:"retrying"`
	Rate           float64    `json:"rate"`
	ConfiguredRate float64    `json:"configured_rate"`
	Burst          int        `json:"burst"`
	Concurrency    int        `json:"concurrency"`
	HeldUntil      *time.Time `json:"held_until"`
	HoldReason     string     `json:"hold_reason"`
	Consecutive429 int        `json:"consecutive_429"`
	Breaker        string     `json:"breaker"`
	BreakerProbeAt *time.Time `json:"breaker_probe_at"` // while open: when the probe may go
	Paused         bool       `json:"paused"`
	// PausedWhy says who or what paused the host: an operator, another
	// replica, or auto_pause_after with the failures that led to it.
	PausedWhy string `json:"paused_why,omitempty"`
	// Webhooks for the host answered with an earlier one's id
	// (Idempotency-Key) since hookpace started.
	Deduplicated int64 `json:"deduplicated"`
	// Webhooks for the host that replaced a queued one
	// (Hookpace-Coalesce-Key) since hookpace started.
	Coalesced   int64      `json:"coalesced"`
	LastError   string     `json:"last_error"`
	LastErrorAt *time.Time `json:"last_error_at"`
	// Auth: which credentials hookpace attaches, when the host's token
	// expires and what the token endpoint last said; never a secret.
	Auth       *credential.Status `json:"auth,omitempty"`
	LastStatus int                `json:"last_status"`
	// Delivered counts the webhooks delivered to the host since the
	// dispatcher took it up (it starts again at 0 once an idle host is
	// forgotten): the status page's history samples it.
	Delivered int64 `json:"delivered"`
	// Shared gates only: "shared", or "degraded: local share 1/N" while
	// the other replicas' shared state can't be reached; the fleet-wide
	// in-flight count as of the last answer (InFlight is this replica's).
	Fleet         string `json:"fleet,omitempty"`
	FleetInFlight *int   `json:"fleet_in_flight,omitempty"`
	// The partner's stated limit while it caps the rate: "learned 10/s
	// from RateLimit-Policy", its rate and burst, and when it lapses
	// unless said again.
	Learned      string     `json:"learned,omitempty"`
	LearnedRate  float64    `json:"learned_rate,omitempty"`
	LearnedBurst int        `json:"learned_burst,omitempty"`
	LearnedUntil *time.Time `json:"learned_until,omitempty"`
	// The bound on attempts in flight now: the adaptive limit with
	// concurrency: auto (Concurrency is then max_concurrency), else
	// concurrency; with auto, why ("auto 5 (min RTT 21 ms, now 24 ms; cut
	// by 503s 2 min ago from 10, ...)"). RateWhy: why the rate is below
	// configured_rate ("cut by 429s 2 min ago from 10/s to 5/s; ...").
	ConcurrencyLimit int    `json:"concurrency_limit"`
	ConcurrencyWhy   string `json:"concurrency_why,omitempty"`
	RateWhy          string `json:"rate_why,omitempty"`
	// Batching hosts only (batch.go).
	Batch *BatchStatus `json:"batch,omitempty"`
	// Rewrite is the rewrite rules in force for the host ("" for none).
	Rewrite string `json:"rewrite,omitempty"`
	// Hosts in lanes only (window.Host.Status).
	Lanes *LaneStatus `json:"lanes,omitempty"`
	// MaxAge is the host's max_age (0: none): a queued webhook older than
	// that dies at the head of the queue, paused or not. For the admin
	// API's notes on what a replay will do; not in the JSON.
	MaxAge time.Duration `json:"-"`
	// WaitingForSlot: the host has a webhook to send and waits its turn
	// because every slot of delivery.max_in_flight is taken (slots.go).
	WaitingForSlot bool `json:"waiting_for_slot,omitempty"`
}

// Text is the batch policy and counts in a few words, for the status
// page and `hookpace status`: "batches of up to 50 (json-array): 200
// webhooks in 4 requests".
func (b *BatchStatus) Text() string {
	return fmt.Sprintf("batches of up to %d (%s): %d webhooks in %d requests", b.MaxEvents, b.Format, b.Webhooks, b.Requests)
}

// BatchStatus is a batching host's policy and what it has delivered in
// batches since hookpace started: requests, and the webhooks they carried.
type BatchStatus struct {
	Format    string `json:"format"`
	MaxEvents int    `json:"max_events"`
	Requests  int64  `json:"requests"`
	Webhooks  int64  `json:"webhooks"`
}

func (d *Dispatcher) statusLocked(h *host, now time.Time) HostStatus {
	st := h.gate.State(now)
	u := d.opts.Stats.HostUsage(h.name)
	hs := HostStatus{
		Host:           h.name,
		Queued:         u.Messages,
		QueuedBytes:    u.Bytes,
		InFlight:       st.InFlight,
		Retrying:       h.win.Retrying(),
		Rate:           st.Rate,
		ConfiguredRate: st.ConfiguredRate,
		Burst:          h.pol.Limits.Burst,
		Concurrency:    h.pol.Limits.Concurrency,
		HoldReason:     st.HoldReason,
		Consecutive429: st.Consecutive429,
		Breaker:        st.Breaker,
		Paused:         st.Paused,
		LastError:      h.troubleR().lastErr,
		LastStatus:     h.troubleR().lastStatus,
		Delivered:      h.delivered,
		WaitingForSlot: h.slotWaiting,
		MaxAge:         h.pol.MaxAge,
	}
	if !st.HeldUntil.IsZero() {
		t := st.HeldUntil.UTC()
		hs.HeldUntil = &t
	}
	if state, at := h.gate.Breaker(); state == pacer.BreakerOpen && st.Breaker == pacer.BreakerOpen {
		t := at.UTC()
		hs.BreakerProbeAt = &t
	}
	if a := h.pol.Auth; a != nil {
		as := a.Status()
		hs.Auth = &as
	}
	hs.Rewrite = h.pol.RewriteRules
	if b := h.pol.Batch; b != nil {
		hs.Batch = &BatchStatus{Format: "json-array", MaxEvents: b.MaxEvents, Requests: h.batches.requests, Webhooks: h.batches.webhooks}
		if b.Envelope {
			hs.Batch.Format = "envelope"
		}
	}
	if at := h.troubleR().lastErrAt; !at.IsZero() {
		t := at.UTC()
		hs.LastErrorAt = &t
	}
	hs.Deduplicated = d.opts.Stats.HostDeduped(h.name)
	if l := h.learn; l != nil && now.Before(l.until) {
		lim := h.limits()
		u := l.until.UTC()
		hs.Learned, hs.LearnedRate, hs.LearnedBurst, hs.LearnedUntil = l.String(), lim.Rate, lim.Burst, &u
		hs.ConfiguredRate = h.pol.Limits.Rate // the pacer's is the learned one
	}
	hs.ConcurrencyLimit, hs.ConcurrencyWhy, hs.RateWhy = st.Concurrency, st.ConcurrencyWhy, st.RateWhy
	hs.Coalesced = d.coalesced(h.name)
	hs.PausedWhy = d.pausedWhyLocked(h.name, st.Paused)
	hs.Lanes = h.win.Status()
	h.gate.Status(now, &hs)
	return hs
}

// countDelivered counts n webhooks delivered to h; d.mu is held.
func (d *Dispatcher) countDelivered(h *host, n int64) {
	h.delivered += n
	d.delivered.Add(n)
}

// Delivered counts the webhooks delivered since the dispatcher started,
// for every host (the status page's history samples it every second).
func (d *Dispatcher) Delivered() int64 { return d.delivered.Load() }

// Hosts reports every host the dispatcher knows, busiest first.
func (d *Dispatcher) Hosts() []HostStatus {
	d.mu.Lock()
	now := time.Now()
	out := make([]HostStatus, 0, len(d.hosts))
	for _, h := range d.hosts {
		out = append(out, d.statusLocked(h, now))
	}
	d.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Queued != out[j].Queued {
			return out[i].Queued > out[j].Queued
		}
		return out[i].Host < out[j].Host
	})
	return out
}

// HostGauge is what the metrics need of one host: a few numbers, where
// a HostStatus also explains them (lanes, learned limits, why paused).
type HostGauge struct {
	Host                string
	Queued, QueuedBytes int64
	InFlight            int
	Rate                float64
	Held                bool // held until a time (429, quota, DNS) or paused
	Paused              bool
	BreakerOpen         bool // open or half-open
	ConcurrencyLimit    int
	Delivered           int64 // webhooks delivered since the host was taken up
}

// HostGauges reports every host's gauges, busiest first as Hosts does
// (the metrics give labels in this order up to their cap): what a scrape
// of /metrics and the status page's history read of each of tens of
// thousands of hosts while d.mu is held, so it builds nothing but these
// numbers.
func (d *Dispatcher) HostGauges() []HostGauge {
	out := d.hostGauges()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Queued != out[j].Queued {
			return out[i].Queued > out[j].Queued
		}
		return out[i].Host < out[j].Host
	})
	return out
}

func (d *Dispatcher) hostGauges() []HostGauge {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	out := make([]HostGauge, 0, len(d.hosts))
	for _, h := range d.hosts {
		st := h.gate.State(now)
		u := d.opts.Stats.HostUsage(h.name)
		out = append(out, HostGauge{Host: h.name, Queued: u.Messages, QueuedBytes: u.Bytes,
			InFlight: st.InFlight, Rate: st.Rate, Held: !st.HeldUntil.IsZero() || st.Paused, Paused: st.Paused,
			BreakerOpen: st.Breaker != pacer.BreakerClosed, ConcurrencyLimit: st.Concurrency, Delivered: h.delivered})
	}
	return out
}

// HostNames lists the hosts the dispatcher knows, in no order: what a
// page of hosts is chosen from before any status is built.
func (d *Dispatcher) HostNames() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]string, 0, len(d.hosts))
	for name := range d.hosts {
		out = append(out, name)
	}
	return out
}

// HostsNamed reports the named hosts, as Hosts does, in the order given;
// a name the dispatcher does not know (any more) is left out.
func (d *Dispatcher) HostsNamed(names []string) []HostStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	out := make([]HostStatus, 0, len(names))
	for _, name := range names {
		if h := d.hosts[name]; h != nil {
			out = append(out, d.statusLocked(h, now))
		}
	}
	return out
}

// Host reports one host; ok is false if the dispatcher has never seen it.
func (d *Dispatcher) Host(name string) (HostStatus, bool) {
	d.mu.Lock()
	h := d.hosts[name]
	if h == nil {
		d.mu.Unlock()
		return HostStatus{}, false
	}
	hs := d.statusLocked(h, time.Now())
	d.mu.Unlock()
	if hs.Lanes != nil {
		d.oldestByKey(name, hs.Lanes)
	}
	return hs, true
}

// DrainTime estimates how long until n more of host's queued webhooks have
// been sent: after the host's hold, at its current (adaptive) rate. It
// says nothing (ok false) for a host that is paused, has no rate, or that
// the dispatcher does not know. Retries and the breaker are not counted:
// it is an estimate for a client's Retry-After.
func (d *Dispatcher) DrainTime(host string, n int64, now time.Time) (wait time.Duration, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	h := d.hosts[host]
	if h == nil {
		return 0, false
	}
	st := h.gate.State(now)
	if st.Paused || st.Rate <= 0 {
		return 0, false
	}
	if !st.HeldUntil.IsZero() {
		wait = st.HeldUntil.Sub(now)
	}
	return wait + time.Duration(float64(n)/st.Rate*float64(time.Second)), true
}

// SetPolicy applies a new policy source (a config reload) to every host.
// Queued messages, holds, breakers and in-flight attempts are kept.
func (d *Dispatcher) SetPolicy(policy func(host string) *Policy) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.opts.Policy = policy
	now := time.Now()
	for _, h := range d.hosts {
		h.pol = policy(h.name)
		h.win.SetPolicy(h.windowPolicy()) // reweighs; unbatches retries if batching is off; weighs batches anew
		h.gate.SetLimits(h.limits(), now)
		if h.timer != nil {
			// The wake time was computed at the old rate.
			h.timer.Stop()
			h.wakeAt = time.Time{}
		}
		d.pump(h)
	}
}

// settleGrace is how long Stop still waits, once its context is done and
// the attempts in flight are abandoned, for them to settle. An abandoned
// request ends at once; an attempt waiting on the spool (a delete held
// while another process has filled the disk) waits for nothing Stop can
// cancel, and is left behind.
const settleGrace = time.Second

// UnsettledError is Stop's error when attempts in flight had not settled
// (their outcome written to the spool) by its deadline and settleGrace
// after it. Their webhooks are still queued in the spool: the next start
// delivers them again (at least once).
type UnsettledError struct {
	Attempts int // attempts still in flight
	Err      error
}

func (e *UnsettledError) Error() string {
	return fmt.Sprintf("%d deliveries did not settle (their outcome was not written to the spool, e.g. a delete waiting for disk space): "+
		"their webhooks stay queued and are delivered again after the next start: %v", e.Attempts, e.Err)
}

func (e *UnsettledError) Unwrap() error { return e.Err }

// Stop stops starting attempts and waits for those in flight until ctx is
// done; then it abandons them (their messages stay queued) and waits at
// most settleGrace for their goroutines to notice. Attempts that still
// have not settled then are left running, and Stop returns an
// *UnsettledError: it never waits longer than ctx plus settleGrace for an
// attempt. Queued messages stay in the spool.
func (d *Dispatcher) Stop(ctx context.Context) error {
	d.mu.Lock()
	d.stopping = true
	if d.sweeper != nil {
		d.sweeper.Stop()
	}
	d.quitOnce.Do(func() { close(d.quit) })
	for _, h := range d.hosts {
		if h.timer != nil {
			h.timer.Stop()
		}
	}
	d.mu.Unlock()
	d.stopRerecord()
	settled := make(chan struct{})
	done := make(chan struct{})
	go func() {
		d.wg.Wait()
		close(settled)
		if d.opts.Gates != nil {
			d.opts.Gates.Stop()
		}
		d.pausing.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	d.cancel()
	grace := time.NewTimer(settleGrace)
	defer grace.Stop()
	select {
	case <-settled:
		<-done // the gates' Stop is bounded; the pause records are not attempts
		return ctx.Err()
	case <-grace.C:
	}
	d.mu.Lock()
	n := d.inFlight + d.unsettled
	d.mu.Unlock()
	return &UnsettledError{Attempts: max(n, 1), Err: ctx.Err()}
}
