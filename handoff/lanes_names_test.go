package handoff_test

import (
	"slices"
	"testing"

	"github.com/hookpace/hookpace/handoff"
	"github.com/hookpace/hookpace/proxy"
)

// The lane headers a hand-off sends are the ones the proxy reads.
func TestLaneHeaderNames(t *testing.T) {
	for _, h := range []string{proxy.HeaderFairnessKey, proxy.HeaderOrderingKey, proxy.HeaderPriority, proxy.HeaderNotBefore} {
		if !slices.Contains(handoff.LaneHeaders, h) {
			t.Errorf("the proxy reads %s; a hand-off does not send it", h)
		}
	}
}
