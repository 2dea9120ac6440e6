package window

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// faultyReader reads the spool, except that the next read fails with
// fail (an I/O error) when it is set.
type faultyReader struct {
	*spool.Spool
	fail error
}

func (r *faultyReader) take() error {
	err := r.fail
	r.fail = nil
	return err
}

func (r *faultyReader) ReadLane(host string, l spool.Lane, after uint64, max int) ([]*spool.Message, error) {
	if err := r.take(); err != nil {
		return nil, err
	}
	return r.Spool.ReadLane(host, l, after, max)
}

func (r *faultyReader) Get(host string, l spool.Lane, id uint64) (*spool.Message, error) {
	if err := r.take(); err != nil {
		return nil, err
	}
	return r.Spool.Get(host, l, id)
}

var errDisk = errors.New("read: input/output error")

// newFaultyFixture is newFixture whose Host reads through a faultyReader.
func newFaultyFixture(t *testing.T, pol Policy) (*fixture, *faultyReader) {
	t.Helper()
	sp, err := spool.Open(spool.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	r := &faultyReader{Spool: sp}
	return newFixtureOn(t, sp, r, pol, 1<<20), r
}

// handOut hands out what f's host has now, and delivers it, its reads
// run and the host pumped after each as the dispatcher does, until it
// has nothing more to hand out before f.clock moves; it returns the ids
// in the order handed out.
func (f *fixture) handOut() []uint64 {
	var ids []uint64
	for step := 0; step < 10_000; step++ {
		m := f.next(f.clock)
		if m == nil {
			f.w.Upkeep(f.clock, time.Time{}, true)
			if len(f.e.reads) == 0 {
				return ids
			}
			f.e.runReads()
			continue
		}
		ids = append(ids, m.ID)
		f.done(m)
	}
	f.t.Fatal("the host never drained")
	return nil
}

// TestDelayed: a webhook whose NotBefore is ahead waits as an id, not in
// memory, without holding back the webhooks behind it; the host wakes
// when it is due, reads it back once its window has room, and hands it
// out then.
func TestDelayed(t *testing.T) {
	f := newFixture(t, Policy{Window: 1}, 1<<20)
	later := f.add(func(m *spool.Message) { m.NotBefore = f.clock.Add(10 * time.Second) })
	now := f.add(nil)
	if f.w.Held() != 1 || f.w.Settled() {
		t.Fatalf("the host holds %d, want only the webhook due now", f.w.Held())
	}
	if st := f.w.Status(); st == nil || st.Delayed != 1 || !strings.Contains(st.Text(), "1 delayed") {
		t.Fatalf("status %+v, want 1 delayed", st)
	}
	if wake := f.w.Upkeep(f.clock, time.Time{}, true); !wake.Equal(later.NotBefore) {
		t.Fatalf("upkeep wakes at %v, want when the delayed webhook is due", wake.Sub(f.clock))
	}
	m := f.next(f.clock)
	if m == nil || m.ID != now.ID {
		t.Fatalf("handed out %v, want the webhook due now", m)
	}
	f.clock = later.NotBefore
	// Due, but the window (1) is full: nothing is read, nor is a wake
	// asked for (the attempt's end pumps the host).
	if wake := f.w.Upkeep(f.clock, time.Time{}, true); !wake.IsZero() || len(f.e.reads) != 0 {
		t.Fatalf("with a full window: wake %v, %d reads; want none", wake, len(f.e.reads))
	}
	f.done(m)
	if ids := f.handOut(); len(ids) != 1 || ids[0] != later.ID {
		t.Fatalf("handed out %v, want the delayed webhook %d", ids, later.ID)
	}
	f.upkeep(f.clock)
	if !f.w.Settled() {
		t.Fatalf("the host is not settled\n%s", f.dump())
	}
}

// TestReadBack: a webhook read back (delayed, or its ordering key's turn)
// that was purged meanwhile is not handed out, whether the purge took it
// while it was read (Select), the spool no longer has it, or the
// dispatcher knows it purged; one that can't be read is read again a
// second later. Each time, its ordering key moves on.
func TestReadBack(t *testing.T) {
	cases := []struct {
		name string
		// gone acts while the read back of m is under way, its reading
		// done (readAhead), and says whether m is gone.
		gone func(f *fixture, r *faultyReader, m *spool.Message) bool
		// before acts before it starts.
		before func(f *fixture, r *faultyReader, m *spool.Message)
	}{
		{"read", nil, nil},
		{"selected while read", func(f *fixture, _ *faultyReader, m *spool.Message) bool {
			held, refs := f.w.Select([]*spool.Message{m})
			if len(held) != 0 || !refs[m.ID] {
				f.t.Fatalf("selected as held %v, as an id %v: want an id", held, refs)
			}
			if _, err := f.sp.Drop([]*spool.Message{m}, "test"); err != nil {
				f.t.Fatal(err)
			}
			return true
		}, nil},
		{"dropped from the spool", nil, func(f *fixture, _ *faultyReader, m *spool.Message) {
			if _, err := f.sp.Drop([]*spool.Message{m}, "test"); err != nil {
				f.t.Fatal(err)
			}
		}},
		{"known purged", nil, func(f *fixture, _ *faultyReader, m *spool.Message) { f.e.purged[m.ID] = true }},
		{"read failed", nil, func(f *fixture, r *faultyReader, _ *spool.Message) { r.fail = errDisk }},
	}
	for _, c := range cases {
		for _, how := range []string{"delayed", "parked"} {
			t.Run(c.name+"/"+how, func(t *testing.T) {
				f, r := newFaultyFixture(t, Policy{Window: 8})
				var first, m, next *spool.Message
				if how == "delayed" {
					m = f.add(func(m *spool.Message) { m.Ordering, m.NotBefore = "o", f.clock.Add(time.Second) })
					next = f.add(func(m *spool.Message) { m.Ordering = "o" })
					f.clock = f.clock.Add(time.Second)
				} else {
					first = f.add(func(m *spool.Message) { m.Ordering = "o" })
					m = f.add(func(m *spool.Message) { m.Ordering = "o" })
					next = f.add(func(m *spool.Message) { m.Ordering = "o" })
				}
				if f.w.Held() > 1 {
					t.Fatalf("the host holds %d of one ordering key", f.w.Held())
				}
				if c.before != nil {
					c.before(f, r, m)
				}
				if first != nil {
					if got := f.next(f.clock); got != first {
						t.Fatalf("handed out %v, want the key's first", got)
					}
					f.done(first) // m's turn: read back
				}
				if f.readAhead() == 0 {
					t.Fatal("no read back under way")
				}
				gone := c.gone != nil && c.gone(f, r, m)
				f.applyReads()
				switch c.name {
				case "dropped from the spool", "known purged":
					gone = true
				case "read failed":
					if got := f.next(f.clock); got != nil {
						t.Fatalf("after a failed read, handed out %d", got.ID)
					}
					if wake := f.w.Upkeep(f.clock, time.Time{}, true); !wake.Equal(f.clock.Add(time.Second)) {
						t.Fatalf("after a failed read, wakes in %v, want 1s", wake.Sub(f.clock))
					}
					f.clock = f.clock.Add(time.Second)
				}
				want := []uint64{m.ID, next.ID}
				if gone {
					want = want[1:]
				}
				if ids := f.handOut(); !equalIDs(ids, want) {
					t.Fatalf("handed out %v, want %v", ids, want)
				}
				f.upkeep(f.clock)
				if !f.w.Settled() {
					t.Fatalf("the host is not settled\n%s", f.dump())
				}
			})
		}
	}
}

func equalIDs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestOrderedKeyStatus: an ordering key's later webhooks wait, parked, for
// its active one, and the status says on what: the active webhook next,
// retrying with its last answer, or delayed; a dead letter in the key is
// counted and the key goes on without it.
func TestOrderedKeyStatus(t *testing.T) {
	f := newFixture(t, Policy{Window: 8}, 1<<20)
	a := f.add(func(m *spool.Message) { m.Ordering = "o-1" })
	for range 2 {
		f.add(func(m *spool.Message) { m.Ordering = "o-1" })
	}
	d := f.add(func(m *spool.Message) { m.Fairness, m.Ordering, m.NotBefore = "t", "o-2", f.clock.Add(time.Minute) })
	f.add(func(m *spool.Message) { m.Fairness, m.Ordering = "t", "o-2" })
	st := f.w.Status()
	if st.OrderingKeys != 2 || st.Parked != 3 || st.Delayed != 1 || len(st.Blocked) != 2 {
		t.Fatalf("status %+v: want 2 ordering keys, 3 parked, 1 delayed, 2 blocked", st)
	}
	want := []BlockedKey{
		{Key: "o-1", Waiting: 2, On: spool.IDString(a.ID), State: "next"},
		{Key: "o-2", Fairness: "t", Waiting: 1, On: spool.IDString(d.ID), State: "delayed"},
	}
	for i, b := range st.Blocked {
		at := b.NextAt
		b.NextAt = nil
		if b != want[i] {
			t.Fatalf("blocked key %d: %+v, want %+v", i, b, want[i])
		}
		if (at != nil) != (b.State == "delayed") || at != nil && !at.Equal(d.NotBefore) {
			t.Fatalf("blocked key %s: next at %v", b.Key, at)
		}
	}

	m := f.next(f.clock)
	if m != a {
		t.Fatalf("handed out %v, want o-1's first", m)
	}
	m.Attempts, m.LastStatus = 3, 503
	f.e.out--
	f.w.RetryAt(f.clock.Add(time.Minute), m)
	b := f.w.Status().Blocked[0]
	if b.State != "retrying" || b.Attempts != 3 || b.NextAt == nil {
		t.Fatalf("blocked on a retry: %+v", b)
	}
	text := f.w.Status().Text()
	if !strings.Contains(text, "o-1 blocked on "+spool.IDString(a.ID)+" (retrying, attempt 3: status 503), 2 waiting") {
		t.Fatalf("status text %q", text)
	}

	// It dies: the key goes on without it.
	f.w.retry.Pop()
	if err := f.sp.Delete(m); err != nil {
		t.Fatal(err)
	}
	f.e.Unkeep(m)
	f.w.OrderedDead(m, "gone for good")
	f.w.Done(m)
	f.w.OrderedDead(&spool.Message{ID: 99}, "not ordered: not counted")
	st = f.w.Status()
	if st.OrderedDead != 1 || st.LastDeadKey != "o-1" || st.LastDeadWhy != "gone for good" {
		t.Fatalf("status %+v: want one dead letter of o-1", st)
	}
	if !strings.Contains(st.Text(), "1 dead letters in ordered keys (last o-1: gone for good)") {
		t.Fatalf("status text %q", st.Text())
	}
	f.clock = f.clock.Add(time.Minute)
	if ids := f.handOut(); len(ids) != 4 {
		t.Fatalf("handed out %v, want the 4 left", ids)
	}
	f.upkeep(f.clock)
	if st := f.w.Status(); st.OrderingKeys != 0 || st.Parked != 0 || len(st.Blocked) != 0 {
		t.Fatalf("drained, status %+v", st)
	}
}

// TestSelectParkedAndDelayed: a purge takes webhooks that wait as ids,
// parked or delayed, as ids; the ordering key moves on past those taken,
// and the others are handed out in order.
func TestSelectParkedAndDelayed(t *testing.T) {
	f := newFixture(t, Policy{Window: 8}, 1<<20)
	var o []*spool.Message
	for range 4 {
		o = append(o, f.add(func(m *spool.Message) { m.Ordering = "o" }))
	}
	d1 := f.add(func(m *spool.Message) { m.NotBefore = f.clock.Add(time.Minute) })
	d2 := f.add(func(m *spool.Message) { m.NotBefore = f.clock.Add(2 * time.Minute) })
	// o[0] is active, o[1] parked (taken), o[2] parked (kept), o[3]
	// parked (taken); d1 taken, d2 kept.
	held, refs := f.w.Select([]*spool.Message{o[1], o[3], d1})
	if len(held) != 0 || len(refs) != 3 || !refs[o[1].ID] || !refs[o[3].ID] || !refs[d1.ID] {
		t.Fatalf("selected as held %v, as ids %v", held, refs)
	}
	if _, err := f.sp.Drop([]*spool.Message{o[1], o[3], d1}, "test"); err != nil {
		t.Fatal(err)
	}
	f.clock = f.clock.Add(2 * time.Minute)
	if ids := f.handOut(); !equalIDs(ids, []uint64{o[0].ID, o[2].ID, d2.ID}) && !equalIDs(ids, []uint64{o[0].ID, d2.ID, o[2].ID}) {
		t.Fatalf("handed out %v, want %d, %d and %d", ids, o[0].ID, o[2].ID, d2.ID)
	}
	f.upkeep(f.clock)
	if !f.w.Settled() {
		t.Fatalf("the host is not settled\n%s", f.dump())
	}
}

// TestSelectActiveDelayed: a purge that takes an ordering key's active
// webhook while it waits delayed moves the key on at once.
func TestSelectActiveDelayed(t *testing.T) {
	f := newFixture(t, Policy{Window: 8}, 1<<20)
	a := f.add(func(m *spool.Message) { m.Ordering, m.NotBefore = "o", f.clock.Add(time.Hour) })
	b := f.add(func(m *spool.Message) { m.Ordering = "o" })
	if _, refs := f.w.Select([]*spool.Message{a}); !refs[a.ID] {
		t.Fatalf("the delayed active webhook was not selected: %v", refs)
	}
	if _, err := f.sp.Drop([]*spool.Message{a}, "test"); err != nil {
		t.Fatal(err)
	}
	if ids := f.handOut(); !equalIDs(ids, []uint64{b.ID}) {
		t.Fatalf("handed out %v, want the key's next, %d, at once", ids, b.ID)
	}
}
