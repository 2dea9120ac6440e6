package admin

import (
	"testing"
	"time"

	"github.com/hookpace/hookpace/deliver"
)

// The status page shows the adaptive concurrency and why under the
// in-flight count, and why a rate was cut under the rate.
func TestPageViewAutoConcurrency(t *testing.T) {
	why := "auto 5 (min RTT 21 ms, now 24 ms; cut by 503s 2 min ago from 10, grows back while the RTT stays under 23 ms)"
	rateWhy := "cut by 429s 2 min ago from 10/s to 5/s; +0.5/s per 20 successes: back to 10/s after 200 more"
	v := hostRow{HostStatus: deliver.HostStatus{Host: "a.example", Rate: 5, ConfiguredRate: 10, Breaker: "closed",
		ConcurrencyLimit: 5, ConcurrencyWhy: why, RateWhy: rateWhy}}.view(time.Now())
	if v.ConcurrencyNote != why {
		t.Errorf("concurrency note %q", v.ConcurrencyNote)
	}
	if want := "of 10/s configured; " + rateWhy; v.RateNote != want {
		t.Errorf("rate note %q, want %q", v.RateNote, want)
	}
}
