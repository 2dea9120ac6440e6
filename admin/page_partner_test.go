package admin

import (
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/deliver"
)

// The status page shows a learned limit under the rate and a quota hold
// as "quota".
func TestPageViewPartnerLimits(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	until := now.Add(800 * time.Millisecond)
	v := hostRow{HostStatus: deliver.HostStatus{Host: "p.example", Rate: 10, ConfiguredRate: 50, Breaker: "closed",
		Learned: "learned 10/s from RateLimit-Policy", HeldUntil: &until, HoldReason: "quota"}}.view(now)
	if v.RateText != "10/s" || v.RateNote != "of 50/s configured; learned 10/s from RateLimit-Policy" {
		t.Errorf("rate %q, note %q", v.RateText, v.RateNote)
	}
	if !strings.HasPrefix(v.Hold, "quota for ") {
		t.Errorf("hold %q, want quota for ...", v.Hold)
	}
	v = hostRow{HostStatus: deliver.HostStatus{Host: "p.example", Rate: 5, ConfiguredRate: 0.5, Breaker: "closed",
		Learned: "learned 5/s from X-RateLimit-Limit"}}.view(now)
	if v.RateNote != "learned 5/s from X-RateLimit-Limit" {
		t.Errorf("note %q", v.RateNote)
	}
}

// A batching host's policy and counts show under its rate.
func TestPageViewBatch(t *testing.T) {
	v := hostRow{HostStatus: deliver.HostStatus{Host: "b.example", Rate: 10, ConfiguredRate: 50, Breaker: "closed",
		Batch: &deliver.BatchStatus{Format: "json-array", MaxEvents: 50, Requests: 4, Webhooks: 200}}}.view(time.Now())
	if want := "of 50/s configured; batches of up to 50 (json-array): 200 webhooks in 4 requests"; v.RateNote != want {
		t.Errorf("note %q, want %q", v.RateNote, want)
	}
}
