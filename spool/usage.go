package spool

import (
	"fmt"
	"time"
)

// FullError reports that the spool (or one host's share of it) is past its
// high-water mark.
type FullError struct {
	Host string // set when only this host's max_queued was reached
	// Over is, for a host's max_queued, how many of its queued messages
	// must leave before one more fits. How soon that is depends on the
	// host's pacing, which the spool does not know: RetryAfter is then
	// zero, for the caller to estimate.
	Over int64
	// RetryAfter estimates when the spool accepts again, at the rate
	// messages have left it lately. It is not bounded: what a client is
	// told is the caller's policy. NoEstimate: nothing has left lately.
	RetryAfter time.Duration
	NoEstimate bool
}

func (e *FullError) Error() string {
	if e.Host != "" {
		return fmt.Sprintf("queue for %s is full (max_queued)", e.Host)
	}
	return "spool is past its high-water mark"
}

// HostUsage is what one host holds in the spool.
type HostUsage struct {
	Messages int64
	Bytes    int64
}

// Usage is a point-in-time view of the spool's size and admission state.
type Usage struct {
	Messages    int64   `json:"messages"`
	Bytes       int64   `json:"bytes"`
	MaxMessages int64   `json:"max_messages"`
	MaxBytes    int64   `json:"max_bytes"`
	Fraction    float64 `json:"usage"` // the larger of the two fractions
	HighWater   float64 `json:"high_water"`
	LowWater    float64 `json:"low_water"`
	Accepting   bool    `json:"accepting"`
	Dead        int64   `json:"dead_letters"`
	DrainRate   float64 `json:"drain_per_second"`
	Hosts       int     `json:"hosts"`
	// DedupeKeys and DedupeBytes are the idempotency keys remembered
	// (dedupe.max_keys, dedupe.max_bytes).
	DedupeKeys  int64 `json:"dedupe_keys"`
	DedupeBytes int64 `json:"dedupe_bytes"`
	// Refusing says why appends fail whatever the watermarks say: the disk
	// is nearly full, or the spool directory is gone. Empty otherwise.
	Refusing string `json:"refusing,omitempty"`
	// Refusal is why new webhooks are refused, watermarks included
	// (RefusalNone: they are admitted). Ready and Why read it.
	Refusal Refusal `json:"-"`
}

// Usage reports the spool's size and admission state.
func (s *Spool) Usage() Usage {
	s.recheckDisk()
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.ledger.usage(time.Now())
	u.Refusing = s.refusingLocked()
	switch {
	case s.closed:
		u.Refusal = RefusalClosed
	case s.dirGone:
		u.Refusal = RefusalDirGone
	case s.diskFull:
		u.Refusal = RefusalDiskFull
	case !u.Accepting:
		u.Refusal = RefusalHighWater
	}
	u.Accepting = u.Refusal == RefusalNone
	return u
}

// Accepting reports whether new webhooks are being admitted.
func (s *Spool) Accepting() bool {
	s.recheckDisk()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ledger.accepting && s.refusingLocked() == "" && !s.closed
}

// Full returns the backpressure answer new webhooks get now, with its
// Retry-After estimate, or nil while the spool accepts them (or is closed:
// Append says so). It lets the proxy refuse before reading a body; Append
// still decides for each message, with its size.
func (s *Spool) Full() *FullError {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ledger.accepting || s.closed {
		return nil
	}
	return s.ledger.full(time.Now())
}

// HostUsage returns what host holds in the spool.
func (s *Spool) HostUsage(host string) HostUsage {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.ledger.hosts[host]; u != nil {
		return *u
	}
	return HostUsage{}
}

// Hosts returns every host with queued messages and what each holds.
func (s *Spool) Hosts() map[string]HostUsage {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]HostUsage, len(s.ledger.hosts))
	for h, u := range s.ledger.hosts {
		out[h] = *u
	}
	return out
}

// SetLimits applies new bounds (from a config reload).
func (s *Spool) SetLimits(maxMessages, maxBytes int64, high, low float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.opts
	o.MaxMessages, o.MaxBytes, o.HighWater, o.LowWater = maxMessages, maxBytes, high, low
	o.setDefaults()
	s.opts.MaxMessages, s.opts.MaxBytes, s.opts.HighWater, s.opts.LowWater = o.MaxMessages, o.MaxBytes, o.HighWater, o.LowWater
	s.ledger.setLimits(s.opts.limits())
}

// Refusal is why the spool refuses new webhooks.
type Refusal uint8

// Refusals. Their String is the reason label of the refusing metric.
const (
	RefusalNone      Refusal = iota
	RefusalHighWater         // past the high-water mark, until below the low-water mark
	RefusalDiskFull          // ErrDiskFull
	RefusalDirGone           // ErrDirGone
	RefusalClosed            // the spool is closed (hookpace is stopping)
)

func (r Refusal) String() string {
	switch r {
	case RefusalHighWater:
		return "high_water"
	case RefusalDiskFull:
		return "disk_full"
	case RefusalDirGone:
		return "dir_gone"
	case RefusalClosed:
		return "closed"
	}
	return ""
}

// Ready is the readiness rule, the one /readyz, the status page and the
// readiness metric apply: ready while webhooks are admitted and hookpace
// is not stopping. why says what keeps it from being ready.
func (u Usage) Ready(stopping bool) (ok bool, why string) {
	if stopping {
		return false, "shutting down"
	}
	if u.Refusal == RefusalNone {
		return true, ""
	}
	return false, u.Why()
}

// Why says why new webhooks are refused, or why they are admitted.
func (u Usage) Why() string {
	switch u.Refusal {
	case RefusalNone:
		return fmt.Sprintf("below the high-water mark (%.0f%%)", 100*u.HighWater)
	case RefusalHighWater:
		return fmt.Sprintf("past the high-water mark (%.0f%%); accepting again below the low-water mark (%.0f%%)",
			100*u.HighWater, 100*u.LowWater)
	case RefusalClosed:
		return "spool closed"
	}
	return u.Refusing
}
