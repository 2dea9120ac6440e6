package deliver

import (
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookpace/hookpace/pacer"
	"github.com/hookpace/hookpace/spool"
)

// A stored webhook that can't be built (a URL or header the builder
// refuses, as an older record may hold) is dead at its first attempt with
// the reason, and the host is judged by the others alone: its breaker,
// which opens at the first host failure here, stays closed, auto-pause
// does not pause it, and the webhooks behind it go at once.
func TestUnsendableIsTheWebhooksFailure(t *testing.T) {
	for _, bad := range []*spool.Message{
		{Host: "partner.example", Method: "POST", URL: "http://partner.example/hook?a=1#%^", Body: []byte("x")},
		{Host: "partner.example", Method: "POST", URL: "http://partner.example/hook", Body: []byte("x"),
			Header: http.Header{"Transfer_Encoding": {"chunked"}}},
		{Host: "partner.example", Method: "POST", URL: "http://partner.example/hook", Body: []byte("x"),
			Header: http.Header{"X-Bad": {"a\r\nInjected: 1"}}},
	} {
		synctest.Test(t, func(t *testing.T) {
			rc := &receiver{}
			pol := policy(100, 10, 1)
			pol.Limits.BreakerFailures = 1
			pol.AutoPauseAfter = time.Nanosecond
			d, q := setup(t, rc, map[string]Policy{"partner.example": pol}, 0)
			q.put(bad)
			synctest.Wait()
			q.add("partner.example", 10)
			synctest.Wait()
			start := time.Now()
			waitEmpty(t, q, time.Minute)
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("the 10 behind it took %v", took)
			}
			if len(q.dead) != 1 || !strings.HasPrefix(q.why[0], "cannot be sent as stored: ") || q.dead[0].Attempts != 1 {
				t.Fatalf("dead %d, reasons %q", len(q.dead), q.why)
			}
			if got := len(rc.arrivals("partner.example")); got != 10 {
				t.Fatalf("%d arrivals, want the 10 good ones (the bad one is never sent)", got)
			}
			st, _ := d.Host("partner.example")
			if st.Breaker != pacer.BreakerClosed || st.Paused {
				t.Fatalf("host %+v: the webhook's failure was counted as the host's", st)
			}
		})
	}
}
