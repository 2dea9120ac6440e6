package fleet

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/redistest"
)

// A pause has one writer path. A resume on another replica clears this
// replica's durable record (not only its gate), even for a host with
// nothing queued, so that a restart without Redis sends; a pause another
// replica made is recorded here when an ask learns it.
func TestGatesPauseOneWriterPath(t *testing.T) {
	srv := redistest.Start(t)
	p := &partner{}
	pol := policy(100, 10, 2)
	a := startReplica(t, srv, "a", p, pol, replicaOpts{})
	b := startReplica(t, srv, "b", p, pol, replicaOpts{})
	const host = "partner.example"
	recorded := func(r *replica) bool {
		p, _ := r.sp.Paused()
		return slices.Contains(p, host)
	}

	if err := a.d.Pause(host); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.d.Resume(host); !ok || err != nil { // b never saw the host
		t.Fatalf("resume at b: %v %v, want it resumed for the fleet", ok, err)
	}
	a.gs.syncPauses()
	waitFor(t, 10*time.Second, "a's record cleared", func() bool {
		st, _ := a.d.Host(host)
		return !st.Paused && !recorded(a)
	})

	// Paused at a again; b, with webhooks queued, learns it at its ask
	// and records it.
	if err := a.d.Pause(host); err != nil {
		t.Fatal(err)
	}
	b.add(t, host, 2)
	waitFor(t, 10*time.Second, "b paused and recorded", func() bool {
		st, _ := b.d.Host(host)
		return st.Paused && recorded(b)
	})
	if err := b.d.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(p.arrivals(host)); n != 0 {
		t.Fatalf("%d deliveries while paused", n)
	}
	// a's pause is still the fleet's: syncing changes nothing.
	if more := a.gs.syncPauses(); !more || !recorded(a) {
		t.Fatalf("a after syncing a pause of its own: more %v, recorded %v", more, recorded(a))
	}
}

// A quota hold one replica learns holds the other too, shown as "quota"
// there, and the learned limit is in force where it was said.
func TestGatesShareQuotaHold(t *testing.T) {
	srv := redistest.Start(t)
	p := &partner{handle: func(*http.Request, int) (int, http.Header) {
		h := http.Header{}
		h.Set("RateLimit-Policy", `"w";q=10;w=1`)
		h.Set("RateLimit", `"w";r=0;t=30`)
		return 200, h
	}}
	pol := policy(50, 10, 1)
	pol.PartnerLimits, pol.PartnerLimitsTTL = true, time.Minute
	a := startReplica(t, srv, "a", p, pol, replicaOpts{})
	b := startReplica(t, srv, "b", p, pol, replicaOpts{})
	a.add(t, "a.example", 1)
	waitFor(t, 10*time.Second, "a's webhook delivered", func() bool { return a.left() == 0 })
	waitFor(t, 10*time.Second, "a held for the quota", func() bool {
		hs, _ := a.d.Host("a.example")
		return hs.HoldReason == "quota" && hs.Learned == "learned 10/s from RateLimit-Policy"
	})
	b.add(t, "a.example", 1)
	waitFor(t, 10*time.Second, "b held for the quota too", func() bool {
		hs, ok := b.d.Host("a.example")
		return ok && hs.HoldReason == "quota" && hs.HeldUntil != nil
	})
	if n := len(p.arrivals("")); n != 1 {
		t.Fatalf("%d sent, want only a's: b must wait for the reset", n)
	}
}

// While no pause or resume happens anywhere, the sync of paused hosts
// costs one GET of the fleet's pause word, not two commands per host; a
// resume elsewhere changes the word, and the next sync asks for the
// states.
func TestGatesPauseSyncOnWordChange(t *testing.T) {
	srv := redistest.Start(t)
	obs := &tripCounter{trips: map[string]int{}}
	a := startReplica(t, srv, "a", &partner{}, policy(100, 10, 2), replicaOpts{obs: obs})
	b := startReplica(t, srv, "b", &partner{}, policy(100, 10, 2), replicaOpts{})
	for _, h := range []string{"p1.example", "p2.example", "p3.example"} {
		if err := a.d.Pause(h); err != nil {
			t.Fatal(err)
		}
	}
	a.gs.syncPauses() // the word changed with a's own pauses: one ask for the states
	before := obs.count("pause_state")
	for range 3 {
		a.gs.syncPauses()
	}
	if n := obs.count("pause_state") - before; n != 0 {
		t.Fatalf("%d asks for the states while nothing changed, want 0", n)
	}
	if ok, err := b.d.Resume("p2.example"); !ok || err != nil {
		t.Fatalf("resume at b: %v %v", ok, err)
	}
	a.gs.syncPauses()
	// The background sync (every second) may have asked too.
	if n := obs.count("pause_state") - before; n < 1 || n > 2 {
		t.Fatalf("%d asks for the states after a resume elsewhere, want 1 (2 with the background sync's)", n)
	}
	waitFor(t, 10*time.Second, "p2 resumed at a", func() bool {
		st, _ := a.d.Host("p2.example")
		return !st.Paused
	})
}
