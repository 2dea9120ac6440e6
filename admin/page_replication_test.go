package admin

import (
	"strings"
	"testing"

	"github.com/hookpace/hookpace/replicate"
)

func TestPageReplication(t *testing.T) {
	for _, c := range []struct {
		name     string
		status   *replicate.Status // nil: no replication
		line     string            // #spool-replication; "" absent
		degraded bool
	}{
		{name: "off"},
		{name: "reachable", status: &replicate.Status{Stream: "hookpace", Replicas: 3, Replica: "b", Reachable: true,
			Adopting: []string{"a"}, Adoptions: 1, Adopted: 2000},
			line: "Replicated to NATS stream hookpace (R3) as replica b · reachable: a 202 is a copy off this node · adopting a · 1 adoption, 2000 webhooks"},
		{name: "refusing", status: &replicate.Status{Stream: "hookpace", Replicas: 3, Replica: "b", OnUnavailable: "refuse"},
			line: "Replicated to NATS stream hookpace (R3) as replica b · unreachable: webhooks are refused (503)", degraded: true},
		{name: "local", status: &replicate.Status{Stream: "hookpace", Replicas: 3, Replica: "b", OnUnavailable: "local", LocalOnly: 12},
			line: "Replicated to NATS stream hookpace (R3) as replica b · unreachable: webhooks are acknowledged on this node alone · 12 on this node alone", degraded: true},
		{name: "lease lost", status: &replicate.Status{Stream: "hookpace", Replicas: 3, Replica: "a", Reachable: true, LeaseLost: true},
			line: "Replicated to NATS stream hookpace (R3) as replica a · reachable: a 202 is a copy off this node · lease lost: another replica adopted this queue while hookpace ran; restart it", degraded: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			if c.status != nil {
				s := *c.status
				f.page.api.Replication = func() replicate.Status { return s }
			}
			_, _, ids, body := f.render(t, "")
			line, ok := ids["spool-replication"]
			if c.line == "" && ok {
				t.Errorf("replication line %q without replication", line)
			}
			if c.line != "" && strings.Join(strings.Fields(line), " ") != c.line {
				t.Errorf("replication line %q, want %q", line, c.line)
			}
			if got := strings.Contains(body, `class="fleet fleet-degraded" id="spool-replication"`); got != c.degraded {
				t.Errorf("replication line marked degraded: %v, want %v", got, c.degraded)
			}
		})
	}
}
