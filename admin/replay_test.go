package admin

import (
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/deliver"
)

// A replay says, per host, whether its webhooks wait (paused, held) and
// when max_age, counted from the replay, kills those still queued.
func TestReplayedHostSaysWhatHappens(t *testing.T) {
	now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	later := now.Add(time.Hour)
	soon := now.Add(time.Second)
	for _, tc := range []struct {
		name string
		st   deliver.HostStatus
		want []string
		die  time.Duration // 0: no die_at
	}{
		{"unknown host", deliver.HostStatus{}, []string{"sent as its pace allows"}, 0},
		{"paced", deliver.HostStatus{MaxAge: 72 * time.Hour}, []string{"sent as its pace allows", "max_age 72h0m0s counts from this replay"}, 72 * time.Hour},
		{"paused", deliver.HostStatus{Paused: true, MaxAge: 3 * time.Second},
			[]string{"paused: they wait until it is resumed (hookpace resume h.example)", "max_age 3s counts from this replay", "die again"}, 3 * time.Second},
		{"paused without max_age", deliver.HostStatus{Paused: true}, []string{"paused: they wait"}, 0},
		{"held past max_age", deliver.HostStatus{HeldUntil: &later, MaxAge: time.Minute},
			[]string{"held until", "max_age 1m0s, counted from this replay, ends first", "unless the hold ends sooner"}, time.Minute},
		{"held briefly", deliver.HostStatus{HeldUntil: &soon, MaxAge: time.Minute},
			[]string{"held until", "they wait until then; max_age 1m0s counts from this replay"}, time.Minute},
	} {
		rh := replayedHost("h.example", tc.st, now, "this replay")
		for _, w := range tc.want {
			if !strings.Contains(rh.Next, w) {
				t.Errorf("%s: %q lacks %q", tc.name, rh.Next, w)
			}
		}
		if tc.die == 0 && rh.DieAt != nil || tc.die != 0 && (rh.DieAt == nil || !rh.DieAt.Equal(now.Add(tc.die))) {
			t.Errorf("%s: die_at %v, want now+%v", tc.name, rh.DieAt, tc.die)
		}
		if rh.Paused != tc.st.Paused || (rh.HeldUntil != nil) != (tc.st.HeldUntil != nil) {
			t.Errorf("%s: %+v", tc.name, rh)
		}
		if note := queuedAgainNote("h.example", tc.st, now, "this resend"); (note == "") != (!tc.st.Paused && tc.st.HeldUntil == nil) {
			t.Errorf("%s: resend note %q", tc.name, note)
		}
	}
}
