package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// windowPartner is a real receiver that allows limit requests per fixed
// 1 s window (aligned on the clock's seconds), answers 429 beyond, and
// announces its limit on every answer with announce.
type windowPartner struct {
	mu       sync.Mutex
	limit    int
	window   int64
	used     int
	announce func(h http.Header, limit, left int, end time.Time)
}

func (p *windowPartner) serve(w http.ResponseWriter, _ *http.Request, _ int) {
	p.mu.Lock()
	now := time.Now()
	if s := now.Unix(); s != p.window {
		p.window, p.used = s, 0
	}
	end := time.Unix(p.window+1, 0)
	status := http.StatusOK
	if p.used < p.limit {
		p.used++
	} else {
		status = http.StatusTooManyRequests
	}
	p.announce(w.Header(), p.limit, p.limit-p.used, end)
	p.mu.Unlock()
	w.WriteHeader(status)
}

// untilSeconds is the time until end in whole seconds, rounded up, as
// partners that send delta seconds do.
func untilSeconds(end time.Time) string {
	return strconv.FormatInt(int64((time.Until(end)+time.Second-1)/time.Second), 10)
}

// A partner allowing 10 per 1 s window that says so,
// with hookpace set 5x too high (50/s burst 10 concurrency 4): 200
// webhooks draw at most 5 429s and all arrive once. The delivery time is
// logged, not asserted (measured from outside by hand; see the issue).
func TestPartnerLimitsFromHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		announce func(h http.Header, limit, left int, end time.Time)
		learned  string
	}{
		{"IETF RateLimit and RateLimit-Policy", func(h http.Header, limit, left int, end time.Time) {
			h.Set("RateLimit-Policy", fmt.Sprintf(`"window";q=%d;w=1`, limit))
			h.Set("RateLimit", fmt.Sprintf(`"window";r=%d;t=%s`, left, untilSeconds(end)))
		}, "learned 10/s from RateLimit-Policy"},
		{"X-RateLimit with an epoch reset", func(h http.Header, limit, left int, end time.Time) {
			h.Set("X-RateLimit-Limit", strconv.Itoa(limit))
			h.Set("X-RateLimit-Remaining", strconv.Itoa(left))
			h.Set("X-RateLimit-Reset", strconv.FormatInt(end.Unix(), 10))
		}, ""},
		{"X-RateLimit with a delta reset", func(h http.Header, limit, left int, end time.Time) {
			h.Set("X-RateLimit-Limit", strconv.Itoa(limit))
			h.Set("X-RateLimit-Remaining", strconv.Itoa(left))
			h.Set("X-RateLimit-Reset", untilSeconds(end))
		}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := &windowPartner{limit: 10, announce: tc.announce}
			rc := NewReceiver(t)
			rc.Handle = p.serve
			hp := Start(t, `
egress: {allow: ["127.0.0.0/8"]}
defaults: {rate: 50/s, burst: 10, concurrency: 4}
`)
			const n = 200
			start := time.Now()
			acked := PostAll(t, hp, n, 16, func(i int) string { return fmt.Sprintf("%s/hook/%d", rc.URL, i) })
			rc.WaitFor(t, 90*time.Second, "200 webhooks delivered", func(as []Arrival) bool { return Delivered2xx(as) >= n })
			took := time.Since(start)

			ok := map[string]int{}
			n429 := 0
			for _, a := range rc.Arrivals() {
				switch a.Status {
				case http.StatusOK:
					ok[a.Path]++
				case http.StatusTooManyRequests:
					n429++
				}
			}
			for path := range acked {
				if ok[path] != 1 {
					t.Errorf("%s delivered %d times, want once", path, ok[path])
				}
			}
			if len(ok) != n {
				t.Errorf("%d distinct webhooks delivered, want %d", len(ok), n)
			}
			if n429 > 5 {
				t.Errorf("%d 429s for %d webhooks, want at most 5", n429, n)
			}
			t.Logf("%s: %d webhooks in %v (the partner's limit allows ~%ds), %d 429s", tc.name, n, took.Round(100*time.Millisecond), n/10, n429)

			var hosts struct {
				Hosts []struct {
					Host           string  `json:"host"`
					Learned        string  `json:"learned"`
					Rate           float64 `json:"rate"`
					ConfiguredRate float64 `json:"configured_rate"`
				}
			}
			hp.AdminJSON("/v1/hosts", &hosts)
			if len(hosts.Hosts) != 1 || hosts.Hosts[0].Learned != tc.learned || hosts.Hosts[0].ConfiguredRate != 50 {
				t.Errorf("/v1/hosts: %+v, want learned %q of configured 50/s", hosts.Hosts, tc.learned)
			}
			log := hp.Log()
			if !strings.Contains(log, "hold=quota") {
				t.Error("no delivery line with hold=quota in the log")
			}
			if tc.learned != "" && strings.Count(log, "partner limit learned") != 1 {
				t.Errorf("'partner limit learned' logged %d times, want once", strings.Count(log, "partner limit learned"))
			}
		})
	}
}
