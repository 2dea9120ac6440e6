package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// A receiver's redirect is a permanent failure: hookpace tries once,
// never follows the Location, and keeps the webhook as a dead letter
// with the status and the reason.
func TestRedirectIsDeadLettered(t *testing.T) {
	t.Parallel()
	elsewhere := NewReceiver(t)
	rc := NewReceiver(t)
	rc.Handle = func(w http.ResponseWriter, r *http.Request, _ int) {
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusFound)
	}
	hp := Start(t, `egress: {allow: ["127.0.0.0/8"]}`)
	const n = 3
	PostAll(t, hp, n, n, func(i int) string { return fmt.Sprintf("%s/moved/%d", rc.URL, i) })
	Poll(t, 10*time.Second, "3 dead letters", func() bool { total, _ := failDeadList(t, hp); return total == n })
	_, dead := failDeadList(t, hp)
	for _, d := range dead {
		if d.Status != http.StatusFound || d.Reason != "redirect 302 not followed" {
			t.Errorf("dead letter %s: status %d, reason %q; want 302, %q", d.ID, d.Status, d.Reason, "redirect 302 not followed")
		}
	}
	if got := rc.Count(nil); got != n {
		t.Errorf("%d attempts at the redirecting receiver, want one per webhook (%d)", got, n)
	}
	if got := elsewhere.Count(nil); got != 0 {
		t.Errorf("the Location was followed: %d requests arrived there", got)
	}
}
