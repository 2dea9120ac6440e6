package fleet

import (
	"math"
	"time"

	"github.com/hookpace/hookpace/pacer"
)

// The fleet's bound at the receiver, whatever the sender's scheduling.
//
// Redis grants tokens by GCRA with a bucket of Capacity: in any window of
// W it grants at most Capacity + R·W (at 99 % of the rate). A busy node
// may use a grant late (its goroutines wait for a CPU), so a send made on
// a token granted at t reaches the receiver at t + d. Were d unbounded,
// sends granted in one second would land in the next beside that
// second's own grants, and no bucket would keep B + R·W.
//
// So every token has a life: a replica starts a send on it (Acquire) only
// within GrantLife of the moment it sent the ask that brought it, which
// is before Redis granted it; after that the grant is given back unused
// (lease released, token returned: GiveBack, as if never taken) and the
// host asks again. Arrivals in a window [a, a+W] then come from tokens
// granted in [a-L, a+W], at most Capacity + R·(W+L), and the bucket holds
// back R·L of the burst for it: Capacity + R·L is pacer.Capacity, which
// still holds back its own margin for the receiver's and the network's
// jitter. The rate is untouched, so an idle fleet gets all of it; only
// the burst a replica may take at once is smaller.
//
// Tokens taken ahead for kept leases (client.go) have the same life, so
// the same argument covers them.
//
// What a life does not cover is the time between Acquire and the request
// on the wire (a goroutine handing it to the transport): a few
// scheduling hops in one process, against a life of tens of
// milliseconds.

// SendSlack is how long a grant may wait for its send when the burst has
// room to hold back that much at the rate; MinLife is the least any grant
// has, so that a replica whose ask takes a few milliseconds on a busy
// node still sends (GrantLife).
const (
	SendSlack = 100 * time.Millisecond
	MinLife   = 50 * time.Millisecond
)

// lateTokens is how many tokens of lim's bucket are held back for late
// sends: R·SendSlack, rounded up, but never more than half of what
// pacer.Capacity leaves, so that a replica still takes several at once.
func lateTokens(lim pacer.Limits) float64 {
	lim = pacer.Sanitize(lim)
	return math.Min(math.Ceil(lim.Rate*SendSlack.Seconds()), math.Floor(pacer.Capacity(lim)/2))
}

// Capacity is the fleet's bucket for lim, in tokens: pacer.Capacity less
// the tokens held back for late sends.
func Capacity(lim pacer.Limits) float64 {
	return pacer.Capacity(lim) - lateTokens(lim)
}

// GrantLife is how long after its ask was sent a grant (or a token taken
// ahead) may start a send: the time the tokens held back last at the
// rate, and at least MinLife.
func GrantLife(lim pacer.Limits) time.Duration {
	held := lateTokens(lim) / pacer.Sanitize(lim).Rate
	return max(time.Duration(held*float64(time.Second)), MinLife)
}

// Rate is the fleet's rate for lim. Where the tokens held back cover
// less than GrantLife (a fast host with a small burst: at 1,000/s a burst
// of 10 holds back 2 ms), the rest is taken from the rate, so that the
// bound holds over windows of a second and more: with the bucket's rate
// R' (99 % of this, as ask.lua grants) and a life L, tokens granted in
// [a-L, a+1s] number at most Capacity + R'·(1s+L), which is within
// B + R·1s when R'·(1s+L) <= R·1s + R·held. Elsewhere it is lim.Rate.
func Rate(lim pacer.Limits) float64 {
	lim = pacer.Sanitize(lim)
	held := lateTokens(lim) / lim.Rate
	life := GrantLife(lim).Seconds()
	return lim.Rate * math.Min(1, (1+held)/(0.99*(1+life)))
}
