package window

// Purges and burials: an operator takes webhooks of a host's queue, those
// on disk and those the Host holds. The Host gives up what it holds of
// them and says which of the others a read may still bring in.

import "github.com/hookpace/hookpace/spool"

// WasRead reports whether m was read from the spool into h: the loads
// are past it.
func (h *Host) WasRead(m *spool.Message) bool {
	h.wake()
	l := h.lanes.get(m.Lane())
	return l == nil || m.ID <= l.cursor // a lane is forgotten once all of it was read
}

// Select removes from h the webhooks among picked that it holds: those
// in memory (ready, retrying, in its lanes) are returned by id, and the
// ids of those waiting as ids (parked or delayed) in refs.
func (h *Host) Select(picked []*spool.Message) (out map[uint64]*spool.Message, refs map[uint64]bool) {
	h.wake()
	want := make(map[uint64]bool, len(picked))
	for _, m := range picked {
		want[m.ID] = true
	}
	out = map[uint64]*spool.Message{}
	refs = h.takeLaned(want, out)
	var idx []int
	for i := range h.ready.Len() {
		if m := h.ready.At(i); want[m.ID] {
			idx = append(idx, i)
		}
	}
	if len(idx) > 0 {
		for _, m := range h.ready.TakeAt(idx) {
			out[m.ID] = m
		}
	}
	items := h.retry.items
	h.retry.items, h.retry.msgs = nil, 0
	for _, it := range items {
		if it.M != nil {
			if want[it.M.ID] {
				out[it.M.ID] = it.M
			} else {
				h.retry.insert(it)
			}
			continue
		}
		var keep []*spool.Message
		for _, m := range it.Batch {
			if want[m.ID] {
				out[m.ID] = m
			} else {
				keep = append(keep, m)
			}
		}
		if len(keep) > 0 {
			h.retry.insert(retryItem{At: it.At, Batch: keep})
		}
	}
	if len(out) > 0 {
		h.dropFits() // what a batch may take along is weighed again
	}
	return out, refs
}
