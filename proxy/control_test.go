package proxy

import (
	"slices"
	"testing"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/spool"
)

// Every header ingest takes out as hookpace's own is one delivery strips
// too (spool.ControlHeaders), and the other way round.
func TestControlHeadersAgree(t *testing.T) {
	ingest := []string{HeaderFairnessKey, HeaderOrderingKey, HeaderPriority, HeaderDelay, HeaderNotBefore,
		config.Default().Dedupe.CoalesceHeader}
	for _, k := range ingest {
		if !slices.Contains(spool.ControlHeaders, k) {
			t.Errorf("%s is stripped at ingest, not at delivery", k)
		}
	}
	for _, k := range spool.ControlHeaders {
		if !slices.Contains(ingest, k) {
			t.Errorf("%s is stripped at delivery, not at ingest", k)
		}
	}
}
