package fleet

import "github.com/hookpace/hookpace/pacer"

// Share is the part of lim that the replica at index (0 to live-1, by
// name: heartbeat.lua) of live replicas takes when it must pace alone:
// the rate divided by live, and the concurrency and the burst divided
// with their remainders going to the first replicas, so that the shares
// of the concurrency add up to the cap exactly. Where the cap is smaller
// than live, some replicas get a concurrency of 0 and send nothing while
// they pace alone (the gate refuses; pacer.Host would read 0 as 1). The
// burst is at least 1 (a pacer's bucket holds a token): with fewer burst
// tokens than live replicas, the fleet together may send live + R·W.
func Share(lim pacer.Limits, live, index int) pacer.Limits {
	if live <= 1 {
		return lim
	}
	index = min(max(index, 0), live-1)
	part := func(n int) int {
		q := n / live
		if index < n%live {
			q++
		}
		return q
	}
	lim.Rate /= float64(live)
	lim.MinRate /= float64(live)
	lim.Burst = max(part(lim.Burst), 1)
	lim.Concurrency = part(lim.Concurrency)
	return lim
}
