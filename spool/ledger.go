package spool

import (
	"fmt"
	"log/slog"
	"math"
	"time"
)

// limits bound what the spool holds (spool.max_messages, max_bytes and the
// watermarks).
type limits struct {
	MaxMessages int64
	MaxBytes    int64
	HighWater   float64 // stop accepting at this fraction of either limit
	LowWater    float64 // accept again at or below this fraction
}

// ledger is the spool's accounting and its admission gate: what is queued,
// in all and per host, how fast it leaves, and whether new webhooks are
// admitted. It knows nothing of Badger and reads no clock: the writer tells
// it what became durable, and callers pass the time. The spool's mutex
// guards it.
type ledger struct {
	lim       limits
	messages  int64
	bytes     int64
	hosts     map[string]*HostUsage
	lanes     map[string]*hostLanes // per host, per lane (lanecount.go)
	dead      int64                 // dead letters
	deadHosts map[string]int64      // dead letters per host (hosts with none absent)
	written   int64                 // bytes written to the queue database since it was last dropped
	accepting bool
	drain     drainMeter
	once      onceStats // idempotency keys (dedupe.go)
	log       *slog.Logger
}

func newLedger(lim limits, log *slog.Logger) *ledger {
	return &ledger{lim: lim, hosts: make(map[string]*HostUsage), lanes: make(map[string]*hostLanes), deadHosts: make(map[string]int64), accepting: true, log: log}
}

// buried counts n more dead letters for host (n may be negative).
func (l *ledger) buried(host string, n int64) {
	l.dead += n
	if l.deadHosts[host] += n; l.deadHosts[host] <= 0 {
		delete(l.deadHosts, host)
	}
}

// storedSize is what a record of val, queued for host, counts against
// spool.max_bytes: the value and its key (prefix, host, separator and id).
// It is the one place that says so; sizes counted when the spool opens
// come from Badger (value size plus key length) and agree with it.
func storedSize(host string, val []byte) int64 {
	return int64(len(val)) + int64(len(host)) + 10
}

// add adds n messages of size bytes to host's usage (n may be negative).
// Sizes read back at start-up are Badger's estimates for value-log entries
// (a byte or so off), so bytes are reset whenever the count reaches zero:
// the error can never accumulate.
func (l *ledger) add(host string, n, size int64) {
	l.messages += n
	l.bytes += size
	if l.messages <= 0 {
		l.bytes = 0
	}
	u := l.hosts[host]
	if u == nil {
		u = &HostUsage{}
		l.hosts[host] = u
	}
	u.Messages += n
	u.Bytes += size
	if u.Messages <= 0 || u.Bytes < 0 {
		delete(l.hosts, host)
	}
}

// fraction is the larger of the message and byte fractions in use,
// counting extra bytes about to be added.
func (l *ledger) fraction(extra int64) float64 {
	fm := float64(l.messages) / float64(l.lim.MaxMessages)
	fb := float64(l.bytes+extra) / float64(l.lim.MaxBytes)
	return math.Max(fm, fb)
}

// admit applies backpressure and reserves room for a message of size bytes
// for host, whose max_queued is hostLimit (0: none). It is the only place
// that decides whether a new webhook may be written: nil, or a *FullError.
func (l *ledger) admit(host string, size, hostLimit int64, now time.Time) error {
	l.gate()
	if l.accepting && l.fraction(size) > l.lim.HighWater {
		// The message would take the spool past its high-water mark.
		l.setAccepting(false)
	}
	if !l.accepting {
		return l.full(now)
	}
	if hostLimit > 0 {
		if u := l.hosts[host]; u != nil && u.Messages >= hostLimit {
			return &FullError{Host: host, Over: u.Messages - hostLimit + 1}
		}
	}
	l.add(host, 1, size)
	return nil
}

// release gives back the reservation of a message that was not written.
func (l *ledger) release(host string, size int64) { l.add(host, -1, -size) }

// left records that a message of size bytes left host's queue (delivered,
// or moved to the dead letters).
func (l *ledger) left(host string, size int64, now time.Time) {
	l.drain.add(now, 1)
	l.add(host, -1, -size)
}

// full is the backpressure answer while the gate is shut.
func (l *ledger) full(now time.Time) *FullError {
	d, ok := l.retryAfter(now)
	return &FullError{RetryAfter: d, NoEstimate: !ok}
}

// setLimits applies new bounds (from a config reload).
func (l *ledger) setLimits(lim limits) {
	l.lim = lim
	l.gate()
}

// gate applies the hysteresis: stop at the high-water mark, start again
// only at or below the low-water mark.
func (l *ledger) gate() {
	f := l.fraction(0)
	switch {
	case l.accepting && f >= l.lim.HighWater:
		l.setAccepting(false)
	case !l.accepting && f <= l.lim.LowWater:
		l.setAccepting(true)
	}
}

func (l *ledger) setAccepting(on bool) {
	if l.accepting == on {
		return
	}
	l.accepting = on
	msg := "spool past high-water mark: answering 429 to new webhooks"
	if on {
		msg = "spool at or below low-water mark: accepting webhooks again"
	}
	l.log.Warn(msg, "messages", l.messages, "bytes", l.bytes, "usage", fmt.Sprintf("%.3f", l.fraction(0)),
		"high_water", l.lim.HighWater, "low_water", l.lim.LowWater)
}

// retryAfter estimates how long until the spool drains to its low-water
// mark at the rate messages have left it lately; false when none has. The
// estimate is not bounded: what a client is told is the proxy's policy.
func (l *ledger) retryAfter(now time.Time) (time.Duration, bool) {
	excess := l.fraction(0) - l.lim.LowWater
	if excess <= 0 {
		return 0, true
	}
	rate := l.drain.rate(now)
	if rate <= 0 {
		return 0, false
	}
	msgs := excess * float64(l.lim.MaxMessages)
	if fb := float64(l.bytes) / float64(l.lim.MaxBytes); fb > float64(l.messages)/float64(l.lim.MaxMessages) && l.messages > 0 {
		// Bytes are the binding limit: convert to messages at the average size.
		msgs = (fb - l.lim.LowWater) * float64(l.lim.MaxBytes) / (float64(l.bytes) / float64(l.messages))
	}
	secs := msgs / rate
	if secs >= math.MaxInt64/float64(time.Second) {
		return math.MaxInt64, true
	}
	return time.Duration(secs * float64(time.Second)), true
}

// usage is Usage, but for Refusing.
func (l *ledger) usage(now time.Time) Usage {
	return Usage{
		Messages:    l.messages,
		Bytes:       l.bytes,
		MaxMessages: l.lim.MaxMessages,
		MaxBytes:    l.lim.MaxBytes,
		Fraction:    l.fraction(0),
		HighWater:   l.lim.HighWater,
		LowWater:    l.lim.LowWater,
		Accepting:   l.accepting,
		Dead:        l.dead,
		DrainRate:   l.drain.rate(now),
		Hosts:       len(l.hosts),
		DedupeKeys:  l.once.keys,
		DedupeBytes: l.once.bytes,
	}
}

// drainMeter estimates how many messages per second leave the spool, over
// the last few seconds, without a ticker. Its window starts no earlier than
// the current spell of draining, so the first estimates after a quiet spell
// (a burst arriving at an idle spool, a host resuming) are not diluted by
// the quiet seconds before them.
type drainMeter struct {
	buckets [8]struct {
		sec int64
		n   int64
	}
	since time.Time // when the current spell of draining started
	last  time.Time // the latest add
}

const (
	drainWindow  = 7 * time.Second        // a spell of draining ends after this long without one
	drainMinSpan = 250 * time.Millisecond // the shortest span a rate is taken over
	drainStall   = time.Second            // at least this long without one: draining has stopped
)

func (d *drainMeter) add(now time.Time, n int64) {
	if d.last.IsZero() || now.Sub(d.last) > drainWindow {
		d.since = now
	}
	d.last = now
	sec := now.Unix()
	b := &d.buckets[sec%int64(len(d.buckets))]
	if b.sec != sec {
		b.sec, b.n = sec, 0
	}
	b.n += n
}

// rate averages over the current second and the six before it, or over
// the time since the spell of draining started if that is shorter (but at
// least drainMinSpan).
func (d *drainMeter) rate(now time.Time) float64 {
	if d.last.IsZero() || now.Sub(d.last) > drainWindow {
		return 0
	}
	sec := now.Unix()
	oldest := sec - int64(len(d.buckets)) + 2 // the 8th bucket may be reused: left out
	var total int64
	for _, b := range d.buckets {
		if b.sec >= oldest && b.sec <= sec {
			total += b.n
		}
	}
	start := time.Unix(oldest, 0)
	if d.since.After(start) {
		start = d.since
	}
	r := float64(total) / max(now.Sub(start), drainMinSpan).Seconds()
	// Draining has stopped (every host paused or held, say) once nothing
	// has left for a second and for three times the usual interval: a rate
	// from seconds earlier would promise the spool a drain it is not getting.
	if gap := now.Sub(d.last).Seconds(); gap > drainStall.Seconds() && gap > 3/r {
		return 0
	}
	return r
}
