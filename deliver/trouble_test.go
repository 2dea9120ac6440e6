package deliver

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

// TestTroubleOnlyOnFailure: a host that has only ever delivered carries
// no failure state; its first failed attempt makes it, and the host's
// status reports that attempt's status and error.
func TestTroubleOnlyOnFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		failures := 0 // bad.example's answers so far: its one webhook is tried once at a time
		rc := &receiver{handle: func(r *http.Request, _ int) (int, http.Header) {
			if r.URL.Host == "bad.example" && failures < 3 {
				failures++
				return 503, nil
			}
			return 200, nil
		}}
		d, q := setup(t, rc, map[string]Policy{"good.example": policy(100, 10, 2), "bad.example": policy(100, 10, 2)}, 0)
		q.add("good.example", 3)
		waitEmpty(t, q, time.Minute)
		d.mu.Lock()
		good := d.hosts["good.example"].trouble
		d.mu.Unlock()
		if good != nil {
			t.Fatalf("a host that only delivered carries failure state %+v", *good)
		}
		q.add("bad.example", 1)
		waitEmpty(t, q, time.Hour)
		hs, ok := d.Host("bad.example")
		if !ok {
			t.Fatal("bad.example has no status")
		}
		if hs.LastStatus != 503 || hs.LastError == "" || hs.LastErrorAt == nil {
			t.Fatalf("status after failures: last status %d, error %q, at %v", hs.LastStatus, hs.LastError, hs.LastErrorAt)
		}
	})
}
