package telemetry

import (
	"context"
	"strings"
	"testing"
)

// Every outcome has its own label value, and one that is not a constant
// is refused loudly instead of being counted as another.
func TestOutcomesAreTyped(t *testing.T) {
	seen := map[string]bool{}
	for o := range numIngestOutcomes {
		name := o.String()
		if name == "" || seen[name] || strings.Contains(name, "(") {
			t.Errorf("ingest outcome %d: name %q (empty, repeated or unnamed)", o, name)
		}
		seen[name] = true
	}
	clear(seen)
	for o := range numDeliveryOutcomes {
		name := o.String()
		if name == "" || seen[name] || strings.Contains(name, "(") {
			t.Errorf("delivery outcome %d: name %q (empty, repeated or unnamed)", o, name)
		}
		seen[name] = true
	}
	if IngestError.String() != "error" || DeliveryDead.String() != "dead" {
		t.Errorf("label values changed: %q, %q", IngestError, DeliveryDead)
	}

	m := newTelemetry(t, Options{}).Metrics
	for _, f := range []func(){
		func() { m.Ingest(context.Background(), numIngestOutcomes) },
		func() { m.Delivery(context.Background(), "a.example", numDeliveryOutcomes) },
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
	if got := m.ingestN[IngestError].Load(); got != 0 {
		t.Errorf("unknown outcome counted as error: %d", got)
	}
}
