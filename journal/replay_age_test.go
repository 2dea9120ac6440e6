package journal

import (
	"context"
	"testing"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// A webhook queued again, from the dead letters or resent, is queued at
// the spool's clock, so that max_age counts from then; its lookup keeps
// the first acceptance's time, and says when it was queued again.
func TestQueuedAgainCountsFromNow(t *testing.T) {
	t0 := time.Unix(1800000000, 0)
	now := t0
	s := openTest(t, t.TempDir(), testOpts{Now: func() time.Time { return now }, Journal: Options{Bodies: true}})
	defer s.Close()
	ctx := context.Background()

	dead, sent := newMsg("r.example", 1), newMsg("r.example", 2)
	for _, m := range []*spool.Message{dead, sent} {
		m.Enqueued = t0
		if err := s.Append(ctx, m, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.BuryAll([]*spool.Message{dead}, "max_age 3s exceeded at the head of the queue", t0.Add(4*time.Second)); err != nil {
		t.Fatal(err)
	}
	deliverKept(t, s, sent)

	now = t0.Add(time.Hour)
	if n, err := s.ReplayDead(spool.DeadFilter{Host: "r.example"}); n != 1 || err != nil {
		t.Fatalf("replay: %d, %v", n, err)
	}
	now = t0.Add(2 * time.Hour)
	again, err := journalOf(s).Resend(ctx, sent.Ref())
	if err != nil {
		t.Fatal(err)
	}
	if !again.Enqueued.Equal(now) {
		t.Fatalf("resent: enqueued %v, want %v", again.Enqueued, now)
	}
	queued, err := s.Read("r.example", 0, 10)
	if err != nil || len(queued) != 2 {
		t.Fatalf("queued: %v, %v; want the replayed and the resent", queued, err)
	}
	want := map[uint64]time.Time{dead.ID: t0.Add(time.Hour), sent.ID: t0.Add(2 * time.Hour)}
	settleJournal(t, s)
	for _, m := range queued {
		if !m.Enqueued.Equal(want[m.Origin]) {
			t.Errorf("%s queued again: enqueued %v, want %v", spool.IDString(m.Origin), m.Enqueued, want[m.Origin])
		}
		v, err := journalOf(s).Lookup(spool.Ref{Seq: m.Origin})
		if err != nil {
			t.Fatal(err)
		}
		if !v.Entry.Accepted.Equal(t0) || !v.Requeued.Equal(want[m.Origin]) || v.State != spool.StateQueued {
			t.Errorf("lookup of %s: accepted %v, requeued %v, state %s; want %v, %v, queued",
				spool.IDString(m.Origin), v.Entry.Accepted, v.Requeued, v.State, t0, want[m.Origin])
		}
	}
}
