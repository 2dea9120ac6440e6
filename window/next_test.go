package window

import (
	"slices"
	"testing"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// jsonSize is a wire format for tests: a webhook adds its body's length
// to a batch, one whose body is "x" goes alone.
func jsonSize(m *spool.Message) int {
	if string(m.Body) == "x" {
		return -1
	}
	return len(m.Body)
}

func batchPolicy(events, bytes int, wait time.Duration) Policy {
	return Policy{Window: 16, Stage: events,
		Batch: &Batch{MaxEvents: events, MaxBytes: bytes, MaxWait: wait, Frame: 2, Size: jsonSize}}
}

// TestNextGathers: the staged head takes along, in order, those behind it
// with its method and URL that fit, up to max_events; one that may not be
// batched, or goes to another URL, is left for later; Take removes what
// was gathered and hands it out as a batch.
func TestNextGathers(t *testing.T) {
	pol := batchPolicy(3, 1<<10, time.Second)
	pol.Stage = 8 // all staged at once
	f := newFixture(t, pol, 1<<20)
	a := f.add(nil)
	other := f.add(func(m *spool.Message) { m.URL += "other" })
	alone := f.add(func(m *spool.Message) { m.Body = []byte("x") })
	b := f.add(nil)
	c := f.add(nil)
	d := f.add(nil)
	p, until := f.w.Next(f.clock)
	if p.Empty() || !until.IsZero() {
		t.Fatalf("nothing picked (until %v)", until)
	}
	ms, batch := f.w.Take(p)
	if !batch || !slices.Equal(ids(ms), ids([]*spool.Message{a, b, c})) {
		t.Fatalf("took %v (batch %v), want a, b, c", ids(ms), batch)
	}
	for _, m := range ms {
		if _, ok := f.w.fits()[m]; ok {
			t.Fatalf("fit remembers %d, which left", m.ID)
		}
	}
	// other leads a batch of one that waits for company, max_wait long.
	p, until = f.w.Next(f.clock)
	if !p.Empty() || !until.Equal(other.Enqueued.Add(time.Second)) {
		t.Fatalf("a lone batch did not wait for company: empty %v, until %v", p.Empty(), until)
	}
	p, _ = f.w.Next(f.clock.Add(time.Second))
	if ms, batch := f.w.Take(p); !batch || !slices.Equal(ids(ms), []uint64{other.ID}) {
		t.Fatalf("took %v, want other alone in its batch", ids(ms))
	}
	p, _ = f.w.Next(f.clock)
	if ms, batch := f.w.Take(p); batch || ms[0] != alone {
		t.Fatalf("took %v (batch %v), want the unbatchable alone", ids(ms), batch)
	}
	p, _ = f.w.Next(f.clock.Add(time.Second))
	if ms, _ := f.w.Take(p); !slices.Equal(ids(ms), []uint64{d.ID}) {
		t.Fatalf("took %v, want d", ids(ms))
	}
}

// TestNextFull: a batch that max_bytes fills goes at once, without
// waiting for company; one that could take more waits while a read is on
// its way, or while attempts are in flight and the spool holds more.
func TestNextFull(t *testing.T) {
	f := newFixture(t, batchPolicy(10, 2+2+1+2, time.Hour), 1<<20)
	for range 3 {
		f.add(nil)
	}
	p, until := f.w.Next(f.clock)
	ms, _ := f.w.Take(p)
	if len(ms) != 2 || !until.IsZero() {
		t.Fatalf("took %d (until %v), want the 2 that fit max_bytes at once", len(ms), until)
	}
	f.w.loading = true
	if p, until := f.w.Next(f.clock); !p.Empty() || !until.IsZero() {
		t.Fatal("a batch did not wait for a read under way")
	}
	f.w.loading, f.w.onDisk, f.e.inFlight = false, true, 1
	if p, until := f.w.Next(f.clock); !p.Empty() || !until.IsZero() {
		t.Fatal("a batch did not wait for what the spool holds while attempts are in flight")
	}
	f.e.inFlight = 0
	if p, until := f.w.Next(f.clock); !p.Empty() || !until.Equal(f.clock.Add(time.Hour)) {
		t.Fatalf("a batch with nothing on its way waits until %v", until)
	}
}

// TestTooBigGoesAlone: a webhook whose body alone is over max_bytes goes
// alone, and is weighed once.
func TestTooBigGoesAlone(t *testing.T) {
	f := newFixture(t, batchPolicy(4, 6, time.Hour), 1<<20)
	asked := 0
	f.w.pol.Batch.Size = func(m *spool.Message) int { asked++; return jsonSize(m) }
	big := f.add(func(m *spool.Message) { m.Body = []byte(`"12345"`) })
	f.add(nil)
	f.w.Next(f.clock)
	p, _ := f.w.Next(f.clock) // asked again, weighed already
	if asked != 1 {
		t.Fatalf("weighed %d times, want once", asked)
	}
	if ms, batch := f.w.Take(p); batch || ms[0] != big {
		t.Fatalf("took %v (batch %v), want the big one alone", ids(ms), batch)
	}
}

// TestComeBack: what was sent and not delivered comes back where its
// verb says: held (a 429) and unfit (Alone) first in line in their order,
// Alone's each going alone; a split's halves first, due at once, each a
// batch; a failure after its backoff, a batch whole.
func TestComeBack(t *testing.T) {
	f := newFixture(t, batchPolicy(4, 1<<10, 0), 1<<20)
	var all []*spool.Message
	for range 8 {
		all = append(all, f.add(nil))
	}
	p, _ := f.w.Next(f.clock)
	first, _ := f.w.Take(p)
	f.w.Hold(first[2:])
	p, _ = f.w.Next(f.clock)
	if ms, _ := f.w.Take(p); !slices.Equal(ids(ms), ids([]*spool.Message{all[2], all[3], all[4], all[5]})) {
		t.Fatalf("after a hold took %v", ids(ms))
	}
	f.w.Alone(first[:2])
	for _, want := range first[:2] {
		p, _ = f.w.Next(f.clock)
		if ms, batch := f.w.Take(p); batch || ms[0] != want {
			t.Fatalf("took %v (batch %v), want %d alone", ids(ms), batch, want.ID)
		}
	}
	f.w.Split(all[2:7], f.clock)
	for _, want := range [][]*spool.Message{all[2:5], all[5:7]} {
		p, _ = f.w.Next(f.clock)
		if ms, batch := f.w.Take(p); !batch || !slices.Equal(ids(ms), ids(want)) {
			t.Fatalf("took %v, want the half %v", ids(ms), ids(want))
		}
	}
	f.w.RetryBatchAt(f.clock.Add(time.Minute), all[:2])
	f.w.RetryAt(f.clock.Add(2*time.Minute), all[2])
	if n := f.w.Due(f.clock); n != 1 {
		t.Fatalf("due now %d, want 1 (all[6], all[7] staged)", n)
	}
	if n := f.w.Due(f.clock.Add(time.Minute)); n != 2 {
		t.Fatalf("due in a minute %d, want 2", n)
	}
	if f.w.Retrying() != 3 {
		t.Fatalf("retrying %d, want 3", f.w.Retrying())
	}
	p, _ = f.w.Next(f.clock.Add(time.Minute))
	if ms, batch := f.w.Take(p); !batch || !slices.Equal(ids(ms), ids(all[:2])) {
		t.Fatalf("took %v, want the batch retried whole", ids(ms))
	}
}

// TestExpireHead: a webhook at the head older than max_age is handed out
// to be buried, a due retry sent alone first, then the staged head; a
// retry not due, or a young head, stays; Upkeep wakes the host when the
// staged head will reach max_age.
func TestExpireHead(t *testing.T) {
	f := newFixture(t, Policy{Window: 8, Stage: 1, MaxAge: time.Minute}, 1<<20)
	old := f.add(nil)
	f.clock = f.clock.Add(30 * time.Second)
	retried := f.add(nil)
	f.add(nil) // young, behind them
	if m := f.w.ExpireHead(f.clock); m != nil {
		t.Fatalf("expired %d, none is past max_age", m.ID)
	}
	p, _ := f.w.Next(f.clock)
	f.w.Take(p) // old, out
	p, _ = f.w.Next(f.clock)
	f.w.Take(p) // retried, out
	f.w.RetryAt(f.clock.Add(time.Hour), retried)
	f.w.Hold([]*spool.Message{old})
	if wake := f.w.Upkeep(f.clock, time.Time{}, true); !wake.Equal(old.Enqueued.Add(time.Minute + time.Millisecond)) {
		t.Fatalf("woken at %v, want when the head reaches max_age", wake)
	}
	later := f.clock.Add(time.Hour)
	if m := f.w.ExpireHead(later); m != retried {
		t.Fatalf("expired %v first, want the due retry", m)
	}
	if m := f.w.ExpireHead(later); m != old {
		t.Fatalf("expired %v, want the staged head", m)
	}
	if m := f.w.ExpireHead(f.clock); m != nil {
		t.Fatalf("expired %d at once, it is young", m.ID)
	}
	f.w.SetPolicy(Policy{Window: 8, Stage: 1})
	if m := f.w.ExpireHead(later); m != nil {
		t.Fatal("expired without a max_age")
	}
}
