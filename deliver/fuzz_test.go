package deliver

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzParseRetryAfter: any header value is read without a panic, as a
// non-negative delay or as "no usable value" (0, false); delay-seconds
// read as that many seconds (a number too large for a Duration as the
// largest one, which the caller caps), and an HTTP-date as the time until
// it (a date at most dateSlack past as now). The committed corpus is in testdata/fuzz/FuzzParseRetryAfter.
func FuzzParseRetryAfter(f *testing.F) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for _, s := range []string{"", "0", "5", " 120 ", "-1", "1.5", "+3", "18446744073709551616", "9223372036", "9223372037",
		"Mon, 23 Nov 2026 12:00:30 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "soon", "5s", "0x10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := ParseRetryAfter(v, now)
		if !ok {
			if d != 0 {
				t.Fatalf("%q: not usable, but %v", v, d)
			}
			return
		}
		if d < 0 {
			t.Fatalf("%q: negative delay %v", v, d)
		}
		s := strings.TrimSpace(v)
		if n, err := strconv.ParseUint(s, 10, 64); err == nil {
			if want := time.Duration(n) * time.Second; n <= uint64((1<<63-1)/time.Second) && d != want {
				t.Fatalf("%q: %v, want %v", v, d, want)
			}
			return
		}
		if s[0] >= '0' && s[0] <= '9' {
			if d != time.Duration(1<<63-1) {
				t.Fatalf("%q: digits beyond uint64 read as %v, want the largest Duration", v, d)
			}
			return
		}
		at, err := http.ParseTime(s)
		if err != nil || max(at.Sub(now), 0) != d || at.Sub(now) < -dateSlack {
			t.Fatalf("%q: %v, but as an HTTP-date: %v, %v", v, d, at, err)
		}
	})
}
