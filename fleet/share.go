package fleet

import (
	"time"

	"github.com/hookpace/hookpace/pacer"
)

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

// Capacity is the shared bucket's size, as pacer.Host sizes its own: the
// burst less a jitter margin of the rate times 25 ms, at most half the
// burst.
func Capacity(lim pacer.Limits) float64 {
	margin := min(int(lim.Rate*(25*time.Millisecond).Seconds()), lim.Burst/2)
	return float64(max(lim.Burst, 1) - margin)
}

// sanitize fills what pacer.New would for limits left at zero.
func sanitize(l pacer.Limits) pacer.Limits {
	if l.Rate <= 0 {
		l.Rate = 1
	}
	l.Burst = max(l.Burst, 1)
	l.Concurrency = max(l.Concurrency, 1)
	if l.MinRate <= 0 || l.MinRate > l.Rate {
		l.MinRate = l.Rate / 10
	}
	if len(l.HoldSchedule) == 0 {
		l.HoldSchedule = []time.Duration{5 * time.Second}
	}
	if l.MaxRetryAfter <= 0 {
		l.MaxRetryAfter = 5 * time.Minute
	}
	l.BreakerFailures = max(l.BreakerFailures, 1)
	if l.BreakerCooldown <= 0 {
		l.BreakerCooldown = 30 * time.Second
	}
	return l
}
