package cli

import (
	"strings"
	"testing"

	"github.com/hookpace/hookpace/replicate"
)

func TestPrintReplicationSaysWhatA202Means(t *testing.T) {
	for _, tc := range []struct {
		s    replicate.Status
		want []string
	}{
		{replicate.Status{Stream: "hookpace", Replicas: 3, Replica: "b", Epoch: 4, Reachable: true, OnUnavailable: "refuse",
			Published: 2000, Removed: 1990, Lag: 10, Leases: []string{"b", "a"}, Adopting: []string{"a"}, Adoptions: 1, Adopted: 2000},
			[]string{"stream hookpace (R3), replica b, epoch 4, reachable", "deletes pending 10", "leases b, a; adopting 1 now; 1 adoptions, 2000 webhooks adopted"}},
		{replicate.Status{Stream: "hookpace", Replicas: 3, Replica: "a", OnUnavailable: "refuse"},
			[]string{"UNREACHABLE: webhooks are refused"}},
		{replicate.Status{Stream: "hookpace", Replicas: 3, Replica: "a", OnUnavailable: "local", LocalOnly: 7},
			[]string{"UNREACHABLE: webhooks are acknowledged on the local spool alone", "local only 7"}},
		{replicate.Status{Stream: "hookpace", Replicas: 3, Replica: "a", Reachable: true, LeaseLost: true},
			[]string{"LEASE LOST: another replica adopted this one's queue while it ran"}},
	} {
		var b strings.Builder
		printReplication(&b, &tc.s)
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("status %+v printed\n%s\nwant %q", tc.s, b.String(), w)
			}
		}
	}
}
