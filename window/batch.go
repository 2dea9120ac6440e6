package window

// Gathering a batch: for a host with a Batch policy, the staged head and
// the webhooks behind it with the same method and URL, in id order, go
// together, up to MaxEvents and MaxBytes. A batch that is not full waits
// for company while more is on its way (a spool read, or attempts in
// flight while the spool holds more), and while its first member is
// younger than MaxWait. The caller owns the wire format: it says, through
// Size and Frame, how many bytes each webhook adds to a batch's body.

import (
	"time"

	"github.com/hookpace/hookpace/spool"
)

// Batch is how a host's webhooks are gathered into batches.
type Batch struct {
	MaxEvents int           // members of one batch, >= 2
	MaxBytes  int           // of a batch's whole body
	MaxWait   time.Duration // how long a lone webhook waits for company
	// Frame is the bytes a batch's body has around its members.
	Frame int
	// Size is how many bytes m adds to a batch's body (a separating
	// comma not counted), or -1 if m may not join a batch (its body is
	// not JSON). It is asked once per staged webhook and remembered
	// until the webhook leaves, a pause ends, a purge takes from the
	// host or the policy changes.
	Size func(m *spool.Message) int
}

// gather returns the batch that head (staged first) leads (head alone
// when it cannot be batched), or nothing while the batch waits for
// company; until is then when it stops waiting (zero: when a read or an
// attempt finishes).
func (h *Host) gather(head *spool.Message, now time.Time) (Pick, time.Time) {
	b := h.pol.Batch
	size := h.fitOf(head)
	if size < 0 {
		return Pick{m: head}, time.Time{}
	}
	idx, total := []int{0}, b.Frame+size
	full := false
	for i := 1; i < h.ready.Len() && len(idx) < b.MaxEvents; i++ {
		m := h.ready.At(i)
		if m.URL != head.URL || m.Method != head.Method {
			continue
		}
		n := h.fitOf(m)
		if n < 0 {
			continue
		}
		if total+1+n > b.MaxBytes {
			full = true
			break
		}
		idx = append(idx, i)
		total += 1 + n
	}
	if !full && len(idx) < b.MaxEvents {
		if h.loading || h.onDisk && h.env.InFlight() > 0 {
			return Pick{}, time.Time{} // company is on its way; its arrival pumps the host
		}
		if until := head.Enqueued.Add(b.MaxWait); now.Before(until) {
			return Pick{}, until
		}
	}
	return Pick{idx: idx}, time.Time{}
}

// fitOf is how many bytes m adds to a batch (a separating comma not
// counted), or -1 if m goes alone: Size says so, or it is too big.
func (h *Host) fitOf(m *spool.Message) int {
	if n, ok := h.fits()[m]; ok {
		return n
	}
	x := h.rareW()
	if x.fit == nil {
		x.fit = make(map[*spool.Message]int)
	}
	b := h.pol.Batch
	n := b.Size(m)
	if n >= 0 && b.Frame+n > b.MaxBytes {
		n = -1
	}
	x.fit[m] = n
	return n
}
