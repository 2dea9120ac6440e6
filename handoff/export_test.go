package handoff

// LaneHeaders are the lane headers a hand-off sends (for the external
// test that checks them against the proxy's).
var LaneHeaders = []string{headerFairnessKey, headerOrderingKey, headerPriority, headerNotBefore}
