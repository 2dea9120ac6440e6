package deliver

// Backlog control: an operator purges or buries the queued webhooks of a
// host that a Selection picks, those on disk and those the dispatcher
// holds, in memory or in flight.

import (
	"time"

	"github.com/hookpace/hookpace/spool"
)

// Selection picks webhooks of one host's queue. The zero value picks all.
type Selection struct {
	OlderThan time.Duration // only those queued longer ago than this
	IDs       []spool.Ref   // only these
	By        string        // who asked, for the log and the journal
}

func (s Selection) match(m *spool.Message, now time.Time) bool {
	if s.OlderThan > 0 && now.Sub(m.Enqueued) <= s.OlderThan {
		return false
	}
	if len(s.IDs) == 0 {
		return true
	}
	for _, r := range s.IDs {
		if r.Matches(m.Ref()) {
			return true
		}
	}
	return false
}

// BacklogResult says what a purge or a burial did.
type BacklogResult struct {
	Host     string `json:"host"`
	Done     int    `json:"done"`      // purged or buried now
	InFlight int    `json:"in_flight"` // being sent: purged or buried when the attempt fails (a success stands)
}

// purges remembers, while a purge or a burial runs, what the dispatcher
// must not take back: webhooks a load of their host may have read before
// they left the spool (true once they have), and those in flight, to drop
// once their attempt has failed.
type purges struct {
	loading  map[string]map[uint64]bool
	inFlight map[uint64]purgeLater
	// failing is, for auto_pause_after, when each host began failing
	// without a success since (maxage.go).
	failing map[string]time.Time
	// pausedWhy says why each paused host is paused (events.go).
	pausedWhy map[string]string
}

type purgeLater struct {
	by   string
	bury bool
}

// Purge removes host's queued webhooks that sel picks, in memory and on
// disk: none of them is sent afterwards.
func (d *Dispatcher) Purge(host string, sel Selection) (BacklogResult, error) {
	return d.takeQueue(host, sel, false)
}

// BuryQueue moves host's queued webhooks that sel picks to the dead
// letters.
func (d *Dispatcher) BuryQueue(host string, sel Selection) (BacklogResult, error) {
	return d.takeQueue(host, sel, true)
}

// purgeChunk is how many queued webhooks a purge reads at a time.
const purgeChunk = 1000

func (d *Dispatcher) takeQueue(host string, sel Selection, bury bool) (BacklogResult, error) {
	res := BacklogResult{Host: host}
	q := d.opts.Store
	now := time.Now()
	var cur spool.HostCursor
	for {
		disk, next, err := d.opts.Reader.ReadHost(host, cur, purgeChunk)
		if err != nil || len(disk) == 0 {
			return res, err // the caller logs what was done, and who asked
		}
		cur = next
		var picked []*spool.Message
		for _, m := range disk {
			if sel.match(m, now) {
				picked = append(picked, m)
			}
		}
		if len(picked) == 0 {
			continue
		}
		take, inFlight := d.withhold(host, picked, sel.By, bury)
		res.InFlight += inFlight
		var n int
		if bury {
			n, err = q.BuryAll(take, "buried by "+sel.By, now)
		} else {
			n, err = q.Drop(take, "purged by "+sel.By)
		}
		res.Done += n
		d.withheld(host, take)
		if err != nil {
			return res, err
		}
	}
}

// withhold takes picked webhooks of host from the dispatcher: those held
// in memory leave it, those not read yet are kept from being read, and
// those in flight are marked. It returns what to remove from the spool
// now (the dispatcher's copies where it holds them) and how many are in
// flight.
func (d *Dispatcher) withhold(host string, picked []*spool.Message, by string, bury bool) ([]*spool.Message, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	h := d.hosts[host]
	held := map[uint64]*spool.Message{}
	var refs map[uint64]bool // waiting as ids (parked or delayed)
	if h != nil {
		held, refs = h.win.Select(picked)
		for _, m := range held {
			d.release(h, m)
		}
	}
	if d.purges.loading == nil {
		d.purges.loading = map[string]map[uint64]bool{}
		d.purges.inFlight = map[uint64]purgeLater{}
	}
	skip := d.purges.loading[host]
	if skip == nil {
		skip = map[uint64]bool{}
		d.purges.loading[host] = skip
	}
	take := make([]*spool.Message, 0, len(picked))
	inFlight := 0
	for _, m := range picked {
		switch mem := held[m.ID]; {
		case mem != nil:
			take = append(take, mem)
		case refs[m.ID]:
			take = append(take, m)
		case h == nil || !h.win.WasRead(m):
			skip[m.ID] = false
			take = append(take, m)
		default:
			d.purges.inFlight[m.ID] = purgeLater{by: by, bury: bury}
			inFlight++
		}
	}
	return take, inFlight
}

// withheld notes that taken webhooks have left the spool: a load that
// starts from now on cannot read them.
func (d *Dispatcher) withheld(host string, taken []*spool.Message) {
	d.mu.Lock()
	defer d.mu.Unlock()
	skip := d.purges.loading[host]
	h := d.hosts[host]
	for _, m := range taken {
		if _, ok := skip[m.ID]; ok {
			skip[m.ID] = true
		}
	}
	if h == nil || !h.win.Loading() {
		d.loadedPurged(host)
	}
}

// skipPurged reports whether a loaded message was purged meanwhile.
func (d *Dispatcher) skipPurged(host string, m *spool.Message) bool {
	_, ok := d.purges.loading[host][m.ID]
	return ok
}

// loadedPurged forgets the purged webhooks that a load of host can no
// longer read: those already gone from the spool.
func (d *Dispatcher) loadedPurged(host string) {
	skip := d.purges.loading[host]
	for id, gone := range skip {
		if gone {
			delete(skip, id)
		}
	}
	if len(skip) == 0 {
		delete(d.purges.loading, host)
	}
}

// purgedInFlight handles an attempt that failed after its webhook was
// purged or buried: it leaves memory and goes as the operator said.
func (d *Dispatcher) purgedInFlight(h *host, m *spool.Message, v verdict, now time.Time) bool {
	p, ok := d.purges.inFlight[m.ID]
	if !ok {
		return false
	}
	delete(d.purges.inFlight, m.ID)
	if v == vDone {
		return false // delivered before the purge could stop it
	}
	d.release(h, m)
	if !p.bury {
		d.opts.Store.DropLater(m, "purged by "+p.by)
	} else {
		d.opts.Store.Bury(m, "buried by "+p.by, now)
	}
	return true
}
