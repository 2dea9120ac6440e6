package fleet

import "github.com/hookpace/hookpace/pacer"

// Share is one replica's part of lim when it must pace alone: rate, burst
// and concurrency divided by the live replica count, rounded down, with
// burst and concurrency at least 1. The fleet together then stays within
// lim.
func Share(lim pacer.Limits, live int) pacer.Limits {
	if live <= 1 {
		return lim
	}
	lim.Rate /= float64(live)
	lim.MinRate /= float64(live)
	lim.Burst = max(lim.Burst/live, 1)
	lim.Concurrency = max(lim.Concurrency/live, 1)
	return lim
}
