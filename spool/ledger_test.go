package spool

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

func testLedger(lim limits) *ledger { return newLedger(lim, slog.New(slog.DiscardHandler)) }

// TestLedgerGate drives the admission gate through a table of steps: the
// hysteresis between the watermarks, on messages and on bytes, and the
// per-host max_queued.
func TestLedgerGate(t *testing.T) {
	type step struct {
		do   string // admit, leave, release
		host string
		size int64
		max  int64  // host limit, for admit
		want string // admit: "ok", "full", "host:<over>"
	}
	lim := limits{MaxMessages: 10, MaxBytes: 1000, HighWater: 0.8, LowWater: 0.5}
	admits := func(n int, size int64, want string) []step {
		var out []step
		for range n {
			out = append(out, step{do: "admit", host: "a", size: size, want: want})
		}
		return out
	}
	leaves := func(n int, size int64) []step {
		var out []step
		for range n {
			out = append(out, step{do: "leave", host: "a", size: size})
		}
		return out
	}
	cat := func(parts ...[]step) []step {
		var out []step
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		steps []step
		msgs  int64
		bytes int64
		open  bool
	}{
		{"up to the high-water mark", admits(8, 1, "ok"), 8, 8, false},
		{"refused past it", cat(admits(8, 1, "ok"), admits(2, 1, "full")), 8, 8, false},
		{"stays shut above low water", cat(admits(8, 1, "ok"), leaves(2, 1), admits(1, 1, "full")), 6, 6, false},
		{"opens at low water", cat(admits(8, 1, "ok"), leaves(3, 1), admits(1, 1, "ok")), 6, 6, true},
		{"bytes: a message that would cross it shuts the gate", cat(admits(7, 100, "ok"), admits(1, 200, "full"), admits(1, 1, "full")), 7, 700, false},
		{"which opens at low water", cat(admits(7, 100, "ok"), admits(1, 200, "full"), leaves(2, 100), admits(1, 1, "ok")), 6, 501, true},
		{"bytes: the gate shuts at the mark", cat(admits(8, 100, "ok"), admits(1, 1, "full")), 8, 800, false},
		{"released reservations count no more", cat(admits(8, 1, "ok"), []step{{do: "release", host: "a", size: 1}}, leaves(2, 1), admits(1, 1, "ok")), 6, 6, true},
		{"host at max_queued", []step{
			{do: "admit", host: "h", size: 1, max: 2, want: "ok"},
			{do: "admit", host: "h", size: 1, max: 2, want: "ok"},
			{do: "admit", host: "h", size: 1, max: 2, want: "host:1"},
			{do: "admit", host: "h", size: 1, max: 1, want: "host:2"},
			{do: "admit", host: "other", size: 1, max: 1, want: "ok"},
			{do: "leave", host: "h", size: 1},
			{do: "admit", host: "h", size: 1, max: 2, want: "ok"},
		}, 3, 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := testLedger(lim)
			now := t0
			for i, st := range tc.steps {
				now = now.Add(10 * time.Millisecond)
				switch st.do {
				case "admit":
					err := l.admit(st.host, st.size, st.max, now)
					var full *FullError
					got := "ok"
					if errors.As(err, &full) {
						got = "full"
						if full.Host != "" {
							got = fmt.Sprintf("host:%d", full.Over)
						}
					} else if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					if got != st.want {
						t.Fatalf("step %d: admit %s %d: %s, want %s", i, st.host, st.size, got, st.want)
					}
					l.gate() // as the writer does once the message is written
				case "leave":
					l.left(st.host, st.size, now)
					l.gate()
				case "release":
					l.release(st.host, st.size)
					l.gate()
				}
			}
			u := l.usage(now)
			if u.Messages != tc.msgs || u.Bytes != tc.bytes || u.Accepting != tc.open {
				t.Fatalf("usage %d messages, %d bytes, accepting %v; want %d, %d, %v", u.Messages, u.Bytes, u.Accepting, tc.msgs, tc.bytes, tc.open)
			}
		})
	}
}

// TestLedgerHostUsage: a host's usage goes when its last message does, and
// byte estimates cannot leave a residue once the spool is empty.
func TestLedgerHostUsage(t *testing.T) {
	l := testLedger(limits{MaxMessages: 100, MaxBytes: 1 << 20, HighWater: 0.8, LowWater: 0.5})
	l.add("a", 1, 101) // as counted at start-up: Badger's estimate
	l.add("b", 1, 50)
	l.left("a", 100, t0) // as recorded when written
	if _, ok := l.hosts["a"]; ok || len(l.hosts) != 1 {
		t.Fatalf("hosts after a's last message left: %v", l.hosts)
	}
	l.left("b", 50, t0)
	if l.messages != 0 || l.bytes != 0 || len(l.hosts) != 0 {
		t.Fatalf("empty spool counts %d messages, %d bytes, %d hosts", l.messages, l.bytes, len(l.hosts))
	}
}

// TestLedgerRetryAfter: the estimate of when the gate opens again, from
// how far above the low-water mark the spool is and how fast it drains.
func TestLedgerRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name        string
		msgs, bytes int64
		drainPerSec int64 // for the last 5 s
		want        time.Duration
		noEstimate  bool
	}{
		{"nothing drained lately", 90, 90, 0, 0, true},
		{"at low water", 50, 50, 0, 0, false},
		{"messages bind", 90, 90, 10, 4 * time.Second, false},
		{"bytes bind: at the average size", 10, 900_000, 2, 2222 * time.Millisecond, false},
		{"slow drain, unbounded", 90, 90, 1, 40 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := testLedger(limits{MaxMessages: 100, MaxBytes: 1_000_000, HighWater: 0.8, LowWater: 0.5})
			l.add("a", tc.msgs, tc.bytes)
			now := t0.Add(time.Hour)
			if tc.drainPerSec > 0 {
				for s := range 5 {
					l.drain.add(now.Add(time.Duration(s)*time.Second), tc.drainPerSec)
				}
				now = now.Add(5 * time.Second)
			}
			got, ok := l.retryAfter(now)
			if ok == tc.noEstimate || (ok && got.Round(time.Millisecond) != tc.want) {
				t.Fatalf("retryAfter %v (estimated %v), want %v (estimated %v)", got, ok, tc.want, !tc.noEstimate)
			}
		})
	}
	// An estimate too long for a Duration saturates; the caller bounds it.
	l := testLedger(limits{MaxMessages: math.MaxInt64, MaxBytes: 1 << 20, HighWater: 0.8, LowWater: 0.1})
	l.add("a", math.MaxInt64/2, 1)
	l.drain.add(t0, 1)
	if got, ok := l.retryAfter(t0.Add(time.Second)); !ok || got != math.MaxInt64 {
		t.Fatalf("huge estimate: %v, %v; want saturated", got, ok)
	}
}

// TestStoredSize: the size counted when a record is written agrees with
// Badger's view of it when the spool opens (value plus key).
func TestStoredSize(t *testing.T) {
	for _, host := range []string{"a.example", "b.example:8443", ""} {
		val := make([]byte, 37)
		if got, want := storedSize(host, val), int64(len(val)+len(queueKey(host, 1))); got != want {
			t.Fatalf("storedSize(%q) %d, want value plus key %d", host, got, want)
		}
	}
}

// TestDrainMeter: the drain rate behind Retry-After follows a spell of
// draining from its start, and forgets it once it is over.
func TestDrainMeter(t *testing.T) {
	var d drainMeter
	t0 := time.Unix(1000, 900e6) // late in a second, as a burst may be
	if r := d.rate(t0); r != 0 {
		t.Fatalf("rate before any drain: %v, want 0", r)
	}
	// A burst reaches an idle spool: a burst of 10 leaves at once, then one
	// every 10 ms. 137 ms in, that is 23 over the shortest span, 250 ms.
	d.add(t0, 10)
	for i := 1; i <= 13; i++ {
		d.add(t0.Add(time.Duration(i)*10*time.Millisecond), 1)
	}
	if r := d.rate(t0.Add(137 * time.Millisecond)); r != 92 {
		t.Fatalf("rate 137 ms into draining: %v, want 23 / 0.25 s = 92", r)
	}
	// Steady at 100/s for ten seconds.
	now := t0.Add(130 * time.Millisecond)
	for now.Before(t0.Add(10 * time.Second)) {
		now = now.Add(10 * time.Millisecond)
		d.add(now, 1)
	}
	if r := d.rate(now); r < 98 || r > 102 {
		t.Fatalf("rate after 10 s at 100/s: %v", r)
	}
	// Draining stops (every host paused): within a second the rate is
	// still the spell's; after it, there is no rate, not one measured
	// seconds earlier.
	if r := d.rate(now.Add(900 * time.Millisecond)); r < 80 || r > 102 {
		t.Fatalf("rate 0.9 s after draining stopped: %v, want about 100", r)
	}
	for _, after := range []time.Duration{1100 * time.Millisecond, 3 * time.Second, 8 * time.Second} {
		if r := d.rate(now.Add(after)); r != 0 {
			t.Fatalf("rate %v after draining stopped: %v, want 0", after, r)
		}
	}
	// A slow steady drain, one every 2 s, keeps its rate between departures.
	var slow drainMeter
	for i := range 4 {
		slow.add(t0.Add(time.Duration(i)*2*time.Second), 1)
	}
	if r := slow.rate(t0.Add(7500 * time.Millisecond)); r <= 0 {
		t.Fatalf("rate 1.5 s after the last of a drain at 0.5/s: %v, want > 0", r)
	}
	// A new spell 20 s later is measured from its own start.
	restart := now.Add(20 * time.Second)
	for i := range 50 {
		d.add(restart.Add(time.Duration(i)*10*time.Millisecond), 1)
	}
	if r := d.rate(restart.Add(500 * time.Millisecond)); r != 100 {
		t.Fatalf("rate 0.5 s into a new spell: %v, want 50 / 0.5 s = 100", r)
	}
}
