package deliver

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// logRecorder keeps the messages and attributes logged, for assertions.
type logRecorder struct {
	mu   sync.Mutex
	recs []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	l.recs = append(l.recs, b.String())
	l.mu.Unlock()
	return nil
}

// count is how many lines contain all of parts.
func (l *logRecorder) count(parts ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.recs {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(r, p) }) {
			n++
		}
	}
	return n
}

// windowPartner allows limit requests per fixed 1 s window (aligned on the
// clock's seconds), answers 429 beyond, and says so with announce.
type windowPartner struct {
	mu       sync.Mutex
	limit    int
	window   int64
	used     int
	n429     int
	announce func(h http.Header, left int, reset time.Duration)
}

func (p *windowPartner) handle(*http.Request, int) (int, http.Header) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if w := now.Unix(); w != p.window {
		p.window, p.used = w, 0
	}
	reset := time.Unix(p.window+1, 0).Sub(now)
	h := http.Header{}
	if p.used >= p.limit {
		p.n429++
		if p.announce != nil {
			p.announce(h, 0, reset)
		}
		return http.StatusTooManyRequests, h
	}
	p.used++
	if p.announce != nil {
		p.announce(h, p.limit-p.used, reset)
	}
	return 200, h
}

func (p *windowPartner) throttled() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n429
}

func ceilSeconds(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
}

func ietf(h http.Header, left int, reset time.Duration) {
	h.Set("RateLimit-Policy", `"window";q=10;w=1`)
	h.Set("RateLimit", fmt.Sprintf(`"window";r=%d;t=%s`, left, ceilSeconds(reset)))
}

func xDelta(h http.Header, left int, reset time.Duration) {
	h.Set("X-RateLimit-Limit", "10")
	h.Set("X-RateLimit-Remaining", strconv.Itoa(left))
	h.Set("X-RateLimit-Reset", ceilSeconds(reset))
}

func xResetAfter(h http.Header, left int, reset time.Duration) {
	h.Set("X-RateLimit-Limit", "10")
	h.Set("X-RateLimit-Remaining", strconv.Itoa(left))
	h.Set("X-RateLimit-Reset-After", strconv.FormatFloat(reset.Seconds(), 'f', 3, 64))
}

func olderDraft(h http.Header, left int, reset time.Duration) {
	h.Set("RateLimit-Limit", "10, 10;w=1")
	h.Set("RateLimit-Remaining", strconv.Itoa(left))
	h.Set("RateLimit-Reset", ceilSeconds(reset))
}

func partnerPolicy(obey bool) Policy {
	pol := policy(50, 10, 4)
	pol.PartnerLimits, pol.PartnerLimitsTTL = obey, time.Minute
	return pol
}

func startRecorded(t *testing.T, q *memQueue, pol Policy, rc *receiver) (*Dispatcher, *logRecorder) {
	t.Helper()
	logs := &logRecorder{}
	d := New(Options{Reader: q, Store: q, Stats: q, Journal: q, Policy: fixed(pol), Client: &http.Client{Transport: rc},
		Logger: slog.New(logs)})
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(context.Background()) })
	return d, logs
}

// Each header family, with hookpace set 5x too high, paces the host to
// the partner's window: no 429, each webhook once, quota holds where the
// window runs out, and the learned limit where a policy is stated.
func TestPartnerLimitsPaceBeforeA429(t *testing.T) {
	tests := []struct {
		name     string
		announce func(http.Header, int, time.Duration)
		learned  string
	}{
		{"IETF RateLimit and RateLimit-Policy", ietf, "learned 10/s from RateLimit-Policy"},
		{"older draft RateLimit-Limit/Remaining/Reset", olderDraft, "learned 10/s from RateLimit-Limit"},
		{"X-RateLimit-* with a delta reset", xDelta, ""},
		{"X-RateLimit-Reset-After", xResetAfter, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := &windowPartner{limit: 10, announce: tc.announce}
				rc := &receiver{handle: p.handle}
				q := newMemQueue()
				d, logs := startRecorded(t, q, partnerPolicy(true), rc)
				q.add("a.example", 60)
				learnedSeen := ""
				for q.left() > 0 {
					time.Sleep(50 * time.Millisecond)
					synctest.Wait()
					if hs, _ := d.Host("a.example"); hs.Learned != "" {
						learnedSeen = hs.Learned
						if hs.ConfiguredRate != 50 || hs.LearnedRate != 10 || hs.LearnedBurst != 10 || hs.Rate > 10 {
							t.Fatalf("learned limit in status: %+v", hs)
						}
					}
				}
				if n := p.throttled(); n != 0 {
					t.Errorf("%d 429s, want none", n)
				}
				ids := map[string]int{}
				for _, a := range rc.arrivals("a.example") {
					ids[a.path]++
				}
				if len(ids) != 60 || len(rc.arrivals("a.example")) != 60 {
					t.Errorf("%d arrivals of %d webhooks, want 60 of 60", len(rc.arrivals("a.example")), len(ids))
				}
				if logs.count("delivery", "hold=quota", "outcome=delivered") == 0 {
					t.Error("no delivery line says hold=quota")
				}
				if learnedSeen != tc.learned {
					t.Errorf("learned %q, want %q", learnedSeen, tc.learned)
				}
				if tc.learned != "" && logs.count("partner limit learned", tc.learned) != 1 {
					t.Errorf("the learned limit was not logged once: %d", logs.count("partner limit learned"))
				}
			})
		})
	}
}

// With partner_limits: ignore, the same partner draws 429s: the headers
// are what kept them away above.
func TestPartnerLimitsIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &windowPartner{limit: 10, announce: ietf}
		rc := &receiver{handle: p.handle}
		q := newMemQueue()
		d, logs := startRecorded(t, q, partnerPolicy(false), rc)
		q.add("a.example", 30)
		waitEmpty(t, q, time.Minute)
		if p.throttled() == 0 {
			t.Error("no 429 with the headers ignored: the test shows nothing")
		}
		if hs, _ := d.Host("a.example"); hs.Learned != "" {
			t.Errorf("learned %q while ignoring", hs.Learned)
		}
		if logs.count("hold=quota") != 0 {
			t.Error("a quota hold while ignoring")
		}
	})
}

// A quota hold is shown as "quota" in the host's status until the reset,
// without failing the message, lowering the rate or counting a 429.
func TestQuotaHoldInStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{handle: func(_ *http.Request, n int) (int, http.Header) {
			h := http.Header{}
			h.Set("X-RateLimit-Remaining", "0")
			h.Set("X-RateLimit-Reset", "30")
			return 200, h
		}}
		q := newMemQueue()
		pol := partnerPolicy(true)
		pol.Limits.Concurrency = 1
		d, _ := startRecorded(t, q, pol, rc)
		q.add("a.example", 3)
		time.Sleep(time.Second)
		synctest.Wait()
		hs, _ := d.Host("a.example")
		if hs.HoldReason != "quota" || hs.HeldUntil == nil || hs.Consecutive429 != 0 || hs.Rate != 50 || hs.LastError != "" {
			t.Fatalf("status during a quota hold: %+v", hs)
		}
		if want := time.Now().Add(29 * time.Second); !hs.HeldUntil.Equal(want.UTC()) {
			t.Errorf("held until %v, want %v", hs.HeldUntil, want)
		}
		if got := len(rc.arrivals("")); got != 1 {
			t.Errorf("%d sent during the hold, want 1", got)
		}
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if got := len(rc.arrivals("")); got != 2 {
			t.Errorf("%d sent after the reset, want 2 (the next answer holds again)", got)
		}
	})
}

// A 429's Retry-After wins over the headers' reset; a 429 without one is
// held until the reset; both feed AIMD as before.
func TestPartnerLimits429(t *testing.T) {
	for _, tc := range []struct {
		name       string
		retryAfter string
		hold       time.Duration
	}{
		{"Retry-After wins", "3", 3 * time.Second},
		{"no Retry-After: the reset", "", 7 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rc := &receiver{handle: func(_ *http.Request, n int) (int, http.Header) {
					h := http.Header{}
					h.Set("RateLimit", `"w";r=0;t=7`)
					if n > 1 {
						return 200, http.Header{}
					}
					if tc.retryAfter != "" {
						h.Set("Retry-After", tc.retryAfter)
					}
					return http.StatusTooManyRequests, h
				}}
				q := newMemQueue()
				d, _ := startRecorded(t, q, partnerPolicy(true), rc)
				q.add("a.example", 1)
				synctest.Wait()
				hs, _ := d.Host("a.example")
				if hs.Consecutive429 != 1 || hs.Rate != 25 || !strings.HasPrefix(hs.HoldReason, "429") {
					t.Fatalf("after a 429: %+v", hs)
				}
				if got := time.Until(*hs.HeldUntil); got != tc.hold {
					t.Errorf("held for %v, want %v", got, tc.hold)
				}
				waitEmpty(t, q, time.Minute)
			})
		})
	}
}

// The learned limit lapses after partner_limits_ttl without the header,
// and a stated limit at or above the configured rate lifts it (it never
// raises the rate).
func TestLearnedLimitExpiresAndNeverRaises(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		policyHdr := `"w";q=10;w=1`
		rc := &receiver{handle: func(*http.Request, int) (int, http.Header) {
			mu.Lock()
			defer mu.Unlock()
			h := http.Header{}
			if policyHdr != "" {
				h.Set("RateLimit-Policy", policyHdr)
			}
			return 200, h
		}}
		q := newMemQueue()
		d, logs := startRecorded(t, q, partnerPolicy(true), rc)
		q.add("a.example", 1)
		waitEmpty(t, q, time.Minute)
		if hs, _ := d.Host("a.example"); hs.Learned != "learned 10/s from RateLimit-Policy" || hs.Rate != 10 {
			t.Fatalf("not learned: %+v", hs)
		}
		mu.Lock()
		policyHdr = ""
		mu.Unlock()
		time.Sleep(59 * time.Second)
		q.add("a.example", 1) // answered without the header
		waitEmpty(t, q, time.Minute)
		time.Sleep(2 * time.Second)
		q.add("a.example", 1) // the minute since the last policy is up
		waitEmpty(t, q, time.Minute)
		if hs, _ := d.Host("a.example"); hs.Learned != "" || hs.Rate != 50 {
			t.Fatalf("learned limit did not expire: %+v", hs)
		}
		if logs.count("partner limit expired", "learned 10/s") != 1 {
			t.Error("expiry not logged once")
		}

		mu.Lock()
		policyHdr = `"w";q=5;w=1`
		mu.Unlock()
		q.add("a.example", 1)
		waitEmpty(t, q, time.Minute)
		if hs, _ := d.Host("a.example"); hs.Rate != 5 || hs.Burst != 10 || hs.LearnedBurst != 5 {
			t.Fatalf("5/s not learned: %+v", hs)
		}
		mu.Lock()
		policyHdr = `"w";q=1000;w=1`
		mu.Unlock()
		q.add("a.example", 1)
		waitEmpty(t, q, time.Minute)
		if hs, _ := d.Host("a.example"); hs.Learned != "" || hs.Rate != 50 {
			t.Fatalf("a stated 1000/s: %+v, want the configured 50/s", hs)
		}
	})
}

// Malformed values are ignored with a log line; delivery goes on.
func TestPartnerLimitsMalformed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{handle: func(*http.Request, int) (int, http.Header) {
			h := http.Header{}
			h.Set("X-RateLimit-Remaining", "lots")
			h.Set("RateLimit-Policy", `"w;q=10`)
			return 200, h
		}}
		q := newMemQueue()
		d, logs := startRecorded(t, q, partnerPolicy(true), rc)
		q.add("a.example", 5)
		waitEmpty(t, q, time.Minute)
		if logs.count("partner rate limit headers ignored", "X-RateLimit-Remaining", "RateLimit-Policy") == 0 {
			t.Errorf("no log line for the malformed headers: %q", logs.recs)
		}
		if hs, _ := d.Host("a.example"); hs.HeldUntil != nil || hs.Learned != "" {
			t.Errorf("malformed headers acted on: %+v", hs)
		}
	})
}

// A 429 whose headers say quota is left is not held until their reset
// (an hourly quota's reset says nothing of this 429): the hold schedule.
func TestPartner429WithQuotaLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{handle: func(_ *http.Request, n int) (int, http.Header) {
			h := http.Header{}
			h.Set("X-RateLimit-Remaining", "4000")
			h.Set("X-RateLimit-Reset", "3000")
			if n > 1 {
				return 200, h
			}
			return http.StatusTooManyRequests, h
		}}
		q := newMemQueue()
		d, _ := startRecorded(t, q, partnerPolicy(true), rc)
		q.add("a.example", 1)
		synctest.Wait()
		hs, _ := d.Host("a.example")
		if got := time.Until(*hs.HeldUntil); got != 2*time.Second || hs.HoldReason != "429" {
			t.Errorf("held %v (%s), want the schedule's 2s (429)", got, hs.HoldReason)
		}
		waitEmpty(t, q, time.Minute)
	})
}
