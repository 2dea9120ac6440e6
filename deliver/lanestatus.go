package deliver

// What operators see of a host's lanes: its busiest
// fairness keys, what it has queued per priority, and the ordering keys
// that are blocked and on what. The counts come from the spool's memory
// (QueueReader.Lanes) and the dispatcher's; the oldest webhook of each busy key
// is read from the spool only for one host's status (Host), never for the
// page's thousands.

import (
	"github.com/hookpace/hookpace/spool"
	"github.com/hookpace/hookpace/window"
)

// LaneStatus, KeyStatus and BlockedKey are what a host's window says of
// its lanes (window.Host.Status).
type (
	LaneStatus = window.LaneStatus
	KeyStatus  = window.KeyStatus
	BlockedKey = window.BlockedKey
)

// oldestByKey fills in when each of the busiest keys' oldest webhook was
// accepted, reading the head of each of its lanes from the spool (off
// the dispatcher's lock).
func (d *Dispatcher) oldestByKey(host string, st *LaneStatus) {
	for i := range st.Busiest {
		k := &st.Busiest[i]
		for _, p := range []spool.Priority{spool.PriorityHigh, spool.PriorityNormal, spool.PriorityLow} {
			ms, err := d.opts.Reader.ReadLane(host, spool.Lane{Key: k.Key, Priority: p}, 0, 1)
			if err != nil || len(ms) == 0 {
				continue
			}
			if at := ms[0].Enqueued.UTC(); k.Oldest == nil || at.Before(*k.Oldest) {
				k.Oldest = &at
			}
		}
	}
}
