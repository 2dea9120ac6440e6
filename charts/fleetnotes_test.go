package charts

import (
	"strings"
	"testing"
)

// TestNotesSayPacingMultiplies: without fleet.redis, NOTES say that each
// pod paces alone (a partner's limit multiplies by the replicas), in both
// modes; with fleet.redis they don't.
func TestNotesSayPacingMultiplies(t *testing.T) {
	for _, tc := range []struct {
		sets []string
		want string
	}{
		{[]string{"mode=sidecar"}, "each pod paces on its own"},
		{[]string{"mode=gateway", "gateway.replicas=3"}, "each of the 3 replicas paces on its own: a partner gets up to\n3 times its rate (a 10/s partner up to 30/s)"},
	} {
		if n := notes(t, tc.sets...); !strings.Contains(n, tc.want) {
			t.Errorf("%v: NOTES lack %q:\n%s", tc.sets, tc.want, n)
		}
		withRedis := append(tc.sets, "hookpace.fleet.redis=redis://redis:6379")
		if n := notes(t, withRedis...); strings.Contains(n, "paces on its own") {
			t.Errorf("%v: NOTES warn with fleet.redis:\n%s", withRedis, n)
		}
	}
	if n := notes(t, "mode=gateway", "gateway.replicas=1"); strings.Contains(n, "paces on its own") {
		t.Errorf("one gateway replica: NOTES warn:\n%s", n)
	}
}
