package partnerlimit

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

var now = time.Unix(1_790_000_000, 250_000_000) // 2026-09-21, .25 s into a second

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestParse(t *testing.T) {
	const maxReset = 5 * time.Minute
	type want struct {
		quota     bool
		remaining int64
		reset     time.Duration // -1: none
		from      string
		policy    bool
		limit     int64
		window    time.Duration
		burst     int64
		pfrom     string
		problem   string // a substring of the problems, "" for none
	}
	noQuota := want{reset: -1}
	tests := []struct {
		name string
		h    http.Header
		want want
	}{
		{"none", hdr("Content-Type", "text/plain"), noQuota},
		{"IETF fields", hdr("RateLimit-Policy", `"default";q=100;w=60`, "RateLimit", `"default";r=12;t=7`),
			want{quota: true, remaining: 12, reset: 7 * time.Second, from: "RateLimit",
				policy: true, limit: 100, window: time.Minute, burst: 100, pfrom: "RateLimit-Policy"}},
		{"IETF, several policies: the strictest rate wins, the smallest quota bounds the burst",
			hdr("RateLimit-Policy", `"burst";q=10;w=1, "day";q=1000;w=86400`, "RateLimit", `"burst";r=3;t=1, "day";r=0;t=60`),
			want{quota: true, remaining: 0, reset: time.Minute, from: "RateLimit",
				policy: true, limit: 1000, window: 24 * time.Hour, burst: 10, pfrom: "RateLimit-Policy"}},
		{"IETF, policies over two field lines", hdr("RateLimit-Policy", `"a";q=50;w=1`, "RateLimit-Policy", `"b";q=10;w=1`),
			want{reset: -1, policy: true, limit: 10, window: time.Second, burst: 10, pfrom: "RateLimit-Policy"}},
		{"IETF, tokens and a partition key are fine", hdr("RateLimit", `default;r=5;t=2;pk=:AQID:`),
			want{quota: true, remaining: 5, reset: 2 * time.Second, from: "RateLimit"}},
		{"IETF, no t", hdr("RateLimit", `"default";r=0`), want{quota: true, remaining: 0, reset: -1, from: "RateLimit"}},
		{"draft-07 dictionary", hdr("RateLimit", `limit=10, remaining=4, reset=3`),
			want{quota: true, remaining: 4, reset: 3 * time.Second, from: "RateLimit"}},
		{"older drafts", hdr("RateLimit-Limit", `10, 10;w=1, 50;w=60`, "RateLimit-Remaining", "9", "RateLimit-Reset", "1"),
			want{quota: true, remaining: 9, reset: time.Second, from: "RateLimit-Remaining",
				policy: true, limit: 50, window: time.Minute, burst: 10, pfrom: "RateLimit-Limit"}},
		{"older drafts' policy field: integers with w", hdr("RateLimit-Policy", `10;w=1`),
			want{reset: -1, policy: true, limit: 10, window: time.Second, burst: 10, pfrom: "RateLimit-Policy"}},
		{"X-RateLimit with a delta reset", hdr("X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "2"),
			want{quota: true, remaining: 0, reset: 2 * time.Second, from: "X-RateLimit-Remaining"}},
		{"X-RateLimit with an epoch reset", hdr("X-RateLimit-Remaining", "3", "X-RateLimit-Reset", "1790000001"),
			want{quota: true, remaining: 3, reset: 750 * time.Millisecond, from: "X-RateLimit-Remaining"}},
		{"X-RateLimit with a fractional epoch reset", hdr("X-RateLimit-Remaining", "3", "X-RateLimit-Reset", "1790000000.5"),
			want{quota: true, remaining: 3, reset: 250 * time.Millisecond, from: "X-RateLimit-Remaining"}},
		{"X-RateLimit-Reset-After wins over the reset", hdr("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1790000100", "X-RateLimit-Reset-After", "0.75"),
			want{quota: true, remaining: 0, reset: 750 * time.Millisecond, from: "X-RateLimit-Remaining"}},
		{"X-RateLimit-Reset as an HTTP-date", hdr("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", now.Add(10*time.Second).UTC().Format(http.TimeFormat)),
			want{quota: true, remaining: 0, reset: 9750 * time.Millisecond, from: "X-RateLimit-Remaining"}},
		{"X-RateLimit-Limit with a window", hdr("X-RateLimit-Limit", "10, 10;w=1"),
			want{reset: -1, policy: true, limit: 10, window: time.Second, burst: 10, pfrom: "X-RateLimit-Limit"}},
		{"X-RateLimit-Limit without a window states no rate", hdr("X-RateLimit-Limit", "10"), noQuota},
		{"IETF wins over X-RateLimit", hdr("RateLimit", `"d";r=5;t=1`, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "9"),
			want{quota: true, remaining: 5, reset: time.Second, from: "RateLimit"}},

		{"epoch in the past: reset now", hdr("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1789999000"),
			want{quota: true, remaining: 0, reset: 0, from: "X-RateLimit-Remaining", problem: "in the past"}},
		{"epoch absurdly far: capped", hdr("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "99999999999"),
			want{quota: true, remaining: 0, reset: maxReset, from: "X-RateLimit-Remaining", problem: "capped at 5m0s"}},
		{"delta beyond the cap", hdr("RateLimit", `"d";r=0;t=86400`),
			want{quota: true, remaining: 0, reset: maxReset, from: "RateLimit", problem: "capped"}},
		{"huge numbers", hdr("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1e300"),
			want{quota: true, remaining: 0, reset: maxReset, from: "X-RateLimit-Remaining", problem: "capped"}},
		{"epoch-sized delta in RateLimit is a delta, capped", hdr("RateLimit", `"d";r=0;t=1790000001`),
			want{quota: true, remaining: 0, reset: maxReset, from: "RateLimit", problem: "capped"}},

		{"malformed RateLimit", hdr("RateLimit", `"default";r=12;t=7,,`), want{reset: -1, problem: "RateLimit"}},
		{"RateLimit without r", hdr("RateLimit", `"default";t=7`), want{reset: -1, problem: "without a valid r"}},
		{"negative r", hdr("RateLimit", `"default";r=-1;t=7`), want{reset: -1, problem: "without a valid r"}},
		{"negative t", hdr("RateLimit", `"default";r=1;t=-7`), want{quota: true, remaining: 1, reset: -1, from: "RateLimit", problem: "not a time"}},
		{"X-RateLimit-Remaining not a number", hdr("X-RateLimit-Remaining", "lots", "X-RateLimit-Reset", "1"), want{reset: -1, problem: "not an integer"}},
		{"X-RateLimit-Reset not a number", hdr("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "soon"),
			want{quota: true, remaining: 0, reset: -1, from: "X-RateLimit-Remaining", problem: "not a number"}},
		{"negative remaining", hdr("X-RateLimit-Remaining", "-3"), want{reset: -1, problem: "not a count"}},
		{"policy with a zero window", hdr("RateLimit-Policy", `"d";q=10;w=0`), want{reset: -1, problem: "not a limit"}},
		{"policy with no quota", hdr("RateLimit-Policy", `"d";q=0;w=1`), want{reset: -1, problem: "not a limit"}},
		{"malformed policy", hdr("RateLimit-Policy", `"d;q=10`), want{reset: -1, problem: "RateLimit-Policy"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := Parse(tc.h, now, maxReset)
			w := tc.want
			got := want{quota: in.HasQuota, remaining: in.Remaining, reset: -1, from: in.QuotaFrom,
				policy: in.HasPolicy, limit: in.Limit, window: in.Window, burst: in.Burst, pfrom: in.PolicyFrom}
			if in.HasReset {
				got.reset = in.Reset
			}
			probs := strings.Join(in.Problems, "; ")
			got.problem = w.problem
			if w.problem == "" && probs != "" || !strings.Contains(probs, w.problem) {
				t.Errorf("problems %q, want one containing %q", probs, w.problem)
			}
			if got != w {
				t.Errorf("Parse = %+v\nwant    %+v", got, w)
			}
			if Present(tc.h) != (tc.name != "none") {
				t.Errorf("Present = %v", Present(tc.h))
			}
		})
	}
}

func TestRate(t *testing.T) {
	in := Parse(hdr("RateLimit-Policy", `"d";q=10;w=2`), now, time.Minute)
	if got := in.Rate(); got != 5 {
		t.Fatalf("Rate = %v, want 5", got)
	}
	if got := (Info{}).Rate(); got != 0 {
		t.Fatalf("Rate without a policy = %v", got)
	}
}
