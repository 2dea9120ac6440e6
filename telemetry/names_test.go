package telemetry

import (
	"context"
	"strings"
	"testing"

	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/proxy"
)

// Every outcome has its own label value, and one that is not a constant
// is refused loudly instead of being counted as another.
func TestOutcomesAreTyped(t *testing.T) {
	seen := map[string]bool{}
	for o := range proxy.NumOutcomes {
		name := o.String()
		if name == "" || seen[name] || strings.Contains(name, "(") {
			t.Errorf("ingest outcome %d: name %q (empty, repeated or unnamed)", o, name)
		}
		seen[name] = true
	}
	clear(seen)
	for o := range deliver.NumOutcomes {
		name := o.String()
		if name == "" || seen[name] || strings.Contains(name, "(") {
			t.Errorf("delivery outcome %d: name %q (empty, repeated or unnamed)", o, name)
		}
		seen[name] = true
	}
	if proxy.OutcomeError.String() != "error" || deliver.OutcomeDead.String() != "dead" {
		t.Errorf("label values changed: %q, %q", proxy.OutcomeError, deliver.OutcomeDead)
	}

	m := newTelemetry(t, Options{}).Metrics
	for _, f := range []func(){
		func() { m.Ingest(context.Background(), proxy.NumOutcomes) },
		func() { m.Delivery(context.Background(), "a.example", deliver.NumOutcomes) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("an unknown outcome was counted")
				}
			}()
			f()
		}()
	}
	if got := m.ingestN[proxy.OutcomeError].Load(); got != 0 {
		t.Errorf("unknown outcome counted as error: %d", got)
	}
}
