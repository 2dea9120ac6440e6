package deliver

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"github.com/hookpace/hookpace/internal/redistest"
)

// Issue 31: a pause has one writer path. A resume on another replica
// clears this replica's durable record (not only its gate), even for a
// host with nothing queued, so that a restart without Redis sends; a
// pause another replica made is recorded here when an ask learns it.
func TestFleetPauseOneWriterPath(t *testing.T) {
	srv := redistest.Start(t)
	rc := &receiver{handle: func(*http.Request, int) (int, http.Header) { return 200, nil }}
	pol := policy(100, 10, 2)
	a, qa, _ := fleetReplica(t, srv, "a", rc, pol)
	b, qb, _ := fleetReplica(t, srv, "b", rc, pol)
	const host = "partner.example"
	recorded := func(q *memQueue) bool {
		p, _ := q.Paused()
		return slices.Contains(p, host)
	}

	if err := a.Pause(host); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.Resume(host); !ok || err != nil { // b never saw the host
		t.Fatalf("resume at b: %v %v, want it resumed for the fleet", ok, err)
	}
	if !recorded(qa) {
		t.Fatal("a's record cleared before a heard of the resume")
	}
	if more := a.syncPauses(); more {
		t.Error("a still has paused hosts after syncing")
	}
	if st, _ := a.Host(host); st.Paused || recorded(qa) {
		t.Fatalf("after a resume at b: a paused %v, recorded %v", st.Paused, recorded(qa))
	}

	// Paused at a again; b, with webhooks queued, learns it at its ask
	// and records it before it stops.
	if err := a.Pause(host); err != nil {
		t.Fatal(err)
	}
	qb.add(host, 2)
	if err := b.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st, _ := b.Host(host); !st.Paused || !recorded(qb) {
		t.Fatalf("b after asking: paused %v, recorded %v", st.Paused, recorded(qb))
	}
	if n := len(rc.arrivals(host)); n != 0 {
		t.Fatalf("%d deliveries while paused", n)
	}
	// a's pause is still the fleet's: syncing changes nothing.
	if more := a.syncPauses(); !more || !recorded(qa) {
		t.Fatalf("a after syncing a pause of its own: more %v, recorded %v", more, recorded(qa))
	}
}
