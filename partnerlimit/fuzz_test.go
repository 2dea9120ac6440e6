package partnerlimit

import (
	"math"
	"net/http"
	"testing"
	"time"
)

// FuzzParse: any values of the headers Parse reads give, without a panic,
// an Info within bounds: a count not below zero, a reset between zero and
// the cap, a policy with a positive quota and window whose burst is no
// larger than its quota. The committed corpus is in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	seeds := [][6]string{
		{`"default";r=12;t=7`, `"default";q=100;w=60`, "", "", "", ""},
		{`"a";r=0;t=1, "b";r=5;t=60`, `"a";q=10;w=1, "b";q=1000;w=3600`, "", "", "", ""},
		{`limit=10, remaining=4, reset=3`, "", "", "", "", ""},
		{"", "", `10, 10;w=1`, "9", "1", ""},
		{"", "", "", "", "", ""},
		{"", "", "10", "0", "1790000001", ""},
		{"", "", "10", "0", "1790000000.5", "0.75"},
		{"", "", "10", "3", "Mon, 21 Sep 2026 14:13:30 GMT", ""},
		{`"d";r=-1;t=1e400`, `"d";q=0;w=-1`, "x", "-3", "1e300", "NaN"},
		{`"d";r=99999999999999;t=999999999999999`, `"d";q=999999999999999;w=0.001`, "", "", "", "inf"},
		{"(1 2);r=1", `("x");q=1;w=1`, "", "", "", ""},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5])
	}
	now := time.Unix(1_790_000_000, 0)
	const maxReset = 5 * time.Minute
	f.Fuzz(func(t *testing.T, rl, policy, limit, remaining, reset, resetAfter string) {
		h := http.Header{}
		set := func(k, v string) {
			if v != "" {
				h.Set(k, v)
			}
		}
		set("RateLimit", rl)
		set("RateLimit-Policy", policy)
		set("X-RateLimit-Limit", limit)
		set("X-RateLimit-Remaining", remaining)
		set("X-RateLimit-Reset", reset)
		set("X-RateLimit-Reset-After", resetAfter)
		if remaining != "" {
			// The older IETF names too, from the same values.
			set("RateLimit-Limit", limit)
			set("RateLimit-Remaining", remaining)
			set("RateLimit-Reset", reset)
		}
		in := Parse(h, now, maxReset)
		if in.HasQuota && (in.Remaining < 0 || in.QuotaFrom == "") {
			t.Fatalf("quota %+v", in)
		}
		if !in.HasQuota && (in.HasReset || in.Remaining != 0) {
			t.Fatalf("a reset without a quota: %+v", in)
		}
		if in.HasReset && (in.Reset < 0 || in.Reset > maxReset) {
			t.Fatalf("reset %v out of [0, %v]", in.Reset, maxReset)
		}
		if in.HasPolicy {
			r := in.Rate()
			if in.Limit < 1 || in.Window <= 0 || in.Burst < 1 || in.Burst > in.Limit ||
				math.IsNaN(r) || math.IsInf(r, 0) || r <= 0 || in.PolicyFrom == "" {
				t.Fatalf("policy %+v (rate %v)", in, r)
			}
		}
	})
}
