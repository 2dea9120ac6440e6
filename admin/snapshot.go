package admin

import (
	"time"

	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/spool"
)

// Snapshot is what operators see at one moment: the spool's usage, every
// host's status, the fleet's state and, with ages, when each host's oldest
// queued webhook was accepted and how many dead letters each host has.
// The status page, the JSON API and the metrics all read one; TakeSnapshot
// is the one place it is built.
type Snapshot struct {
	At    time.Time
	Usage spool.Usage
	Hosts []deliver.HostStatus // busiest first
	Fleet *deliver.FleetStatus // nil without a fleet
	// Oldest and Dead, taken only with ages: the oldest queued webhook's
	// acceptance by host (hosts with a backlog), and dead letters by host.
	Oldest map[string]time.Time
	Dead   map[string]int64
	// Problems are what could not be read, for the page to say.
	Problems []string
}

// TakeSnapshot builds a snapshot at now. ages also reads each host's
// oldest queued webhook (one read of a record's head per host with a
// backlog) and the dead letters by host (kept in memory).
func TakeSnapshot(h Hosts, sp Spool, now time.Time, ages bool) *Snapshot {
	s := &Snapshot{At: now, Usage: sp.Usage(), Hosts: h.Hosts(), Fleet: h.Fleet()}
	if !ages {
		return s
	}
	if s.Usage.Dead > 0 {
		var err error
		if s.Dead, err = sp.DeadByHost(); err != nil {
			s.Problems = append(s.Problems, "dead letters per host: "+err.Error())
		}
	}
	s.Oldest = make(map[string]time.Time)
	for _, hs := range s.Hosts {
		if hs.Queued <= 0 {
			continue
		}
		at, ok, err := sp.Oldest(hs.Host)
		if err != nil {
			s.Problems = append(s.Problems, "oldest message of "+hs.Host+": "+err.Error())
			continue
		}
		if ok {
			s.Oldest[hs.Host] = at
		}
	}
	return s
}
