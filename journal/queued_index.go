package journal

import (
	"hash/maphash"
	"slices"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hookpace/hookpace/spool"
)

// queuedIndex is the journal's index of the queued webhooks, in memory:
// their ids in order (the order they were accepted), each with its host
// and lane (the rest of its queue key), and the ids by Idempotency-Key.
// It is what the journal's indexes on disk are for finished webhooks,
// without a write at ingest: the journal keeps it in step at its hand-over
// points (Journal.Settled, after each round's queue write), and
// builds it at Open from the queue's records. About 30 bytes a queued
// webhook, 50 more with an Idempotency-Key. Guarded by Journal.mu.
type queuedIndex struct {
	ids   []uint64
	where []*laneRef // of ids[i]; nil: gone
	gone  int
	lanes map[laneRef]*laneRef
	idem  map[uint64][]uint64 // hash of the key -> ids
	seed  maphash.Seed
}

// laneRef is a host and lane, interned: the queue key's other parts.
type laneRef struct {
	host string
	lane spool.Lane
}

func newQueuedIndex() *queuedIndex {
	return &queuedIndex{lanes: make(map[laneRef]*laneRef), idem: make(map[uint64][]uint64), seed: maphash.MakeSeed()}
}

func (x *queuedIndex) hash(key string) uint64 { return maphash.String(x.seed, key) }

// add indexes a webhook queued with id, above every id indexed.
func (x *queuedIndex) add(id uint64, host string, lane spool.Lane, idem string) {
	if n := len(x.ids); n > 0 && id <= x.ids[n-1] {
		return // a replacement of a queued webhook's content: indexed
	}
	ref := x.lanes[laneRef{host, lane}]
	if ref == nil {
		ref = &laneRef{host, lane}
		x.lanes[*ref] = ref
	}
	x.ids = append(x.ids, id)
	x.where = append(x.where, ref)
	if idem != "" {
		h := x.hash(idem)
		x.idem[h] = append(x.idem[h], id)
	}
}

// remove forgets id, which left the queue; idem is its Idempotency-Key.
func (x *queuedIndex) remove(id uint64, idem string) {
	i, ok := slices.BinarySearch(x.ids, id)
	if !ok || x.where[i] == nil {
		return
	}
	x.where[i] = nil
	x.gone++
	if idem != "" {
		h := x.hash(idem)
		if ids := slices.DeleteFunc(x.idem[h], func(v uint64) bool { return v == id }); len(ids) == 0 {
			delete(x.idem, h)
		} else {
			x.idem[h] = ids
		}
	}
	if x.gone > 1024 && x.gone > len(x.ids)/2 {
		x.compact()
	}
}

// compact drops the ids gone, and the lanes no id is in.
func (x *queuedIndex) compact() {
	ids, where := x.ids[:0], x.where[:0]
	used := make(map[*laneRef]bool)
	for i, ref := range x.where {
		if ref != nil {
			ids, where = append(ids, x.ids[i]), append(where, ref)
			used[ref] = true
		}
	}
	clear(x.where[len(where):])
	x.ids, x.where, x.gone = slices.Clip(ids), slices.Clip(where), 0
	for k, ref := range x.lanes {
		if !used[ref] {
			delete(x.lanes, k)
		}
	}
	for h, ids := range x.idem { // a key a removal did not name
		ids = slices.DeleteFunc(ids, func(id uint64) bool { _, ok := x.find(id); return !ok })
		if len(ids) == 0 {
			delete(x.idem, h)
		} else {
			x.idem[h] = ids
		}
	}
}

// find is the host and lane of queued id; ok is false when it is not
// queued.
func (x *queuedIndex) find(id uint64) (ref laneRef, ok bool) {
	i, found := slices.BinarySearch(x.ids, id)
	if !found || x.where[i] == nil {
		return laneRef{}, false
	}
	return *x.where[i], true
}

// candidate is a queued webhook a listing may show: its id and queue key.
type candidate struct {
	id  uint64
	ref laneRef
}

// before is up to n queued webhooks with ids in (above, below), newest
// first, on host if one is named; with idem, only those with that
// Idempotency-Key's hash.
func (x *queuedIndex) before(below, above uint64, host, idem string, n int) []candidate {
	var out []candidate
	if idem != "" {
		ids := x.idem[x.hash(idem)]
		for k := len(ids) - 1; k >= 0 && len(out) < n; k-- {
			if id := ids[k]; id < below && id > above {
				if ref, ok := x.find(id); ok && (host == "" || ref.host == host) {
					out = append(out, candidate{id, ref})
				}
			}
		}
		slices.SortFunc(out, func(a, b candidate) int { return -cmpUint(a.id, b.id) })
		return out
	}
	i, _ := slices.BinarySearch(x.ids, below)
	for i--; i >= 0 && len(out) < n && x.ids[i] > above; i-- {
		if ref := x.where[i]; ref != nil && (host == "" || ref.host == host) {
			out = append(out, candidate{x.ids[i], *ref})
		}
	}
	return out
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// buildQueuedIndex indexes the queued webhooks from the queue's records,
// and the later lives among them (queuedLives): every lane of every host,
// read once at Open.
func (j *Journal) buildQueuedIndex() error {
	x := newQueuedIndex()
	type item struct {
		id   uint64
		ref  laneRef
		idem string
	}
	var all []item
	txn := j.st.ReadQueue()
	defer txn.Discard()
	trim := scanTrim{st: j.st}
	for _, p := range queuedPrefixes("") {
		// Values read in place, their heads only: the bodies stay on disk.
		it := txn.NewIterator(badger.IteratorOptions{Prefix: p})
		for it.Rewind(); it.Valid(); it.Next() {
			trim.step()
			host, lane, id, ok := spool.ParseQueueKey(it.Item().Key())
			if !ok {
				continue
			}
			var idem string
			it.Item().Value(func(v []byte) error {
				if m, err := spool.DecodeMessageHead(host, id, v); err == nil {
					idem = m.Header.Get("Idempotency-Key")
					if origin := reliveOrigin(m); origin != 0 {
						j.relived.add(origin, id) // the spool takes no write yet
					}
				}
				return nil
			})
			all = append(all, item{id, laneRef{host, lane}, idem})
		}
		it.Close()
	}
	if len(all) > 0 {
		// The pages of the records' heads this read: what Open returns
		// with is trimmed (settleOpen).
		j.st.Trim(true)
	}
	slices.SortFunc(all, func(a, b item) int { return cmpUint(a.id, b.id) })
	for _, it := range all {
		x.add(it.id, it.ref.host, it.ref.lane, it.idem)
	}
	j.mu.Lock()
	j.queued = x
	j.mu.Unlock()
	return nil
}
