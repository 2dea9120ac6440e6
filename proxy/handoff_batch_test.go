package proxy

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/hookpace/hookpace/handoff"
)

// chunk is the headers of a hand-off chunk of post's body to laneHost:
// claim, batch header and both signatures with secret (the batch's with
// batchSecret).
func chunk(claim string, b handoff.Batch, secret, batchSecret []byte) http.Header {
	h := handedOff(claim, secret, "", nil)
	v := b.Encode()
	h.Set(handoff.BatchHeader, v)
	h.Set(handoff.BatchSignatureHeader, handoff.SignBatch(batchSecret, claim, v))
	h.Set("Hookpace-Ordering-Key", "k")
	return h
}

// claimN is the claim of the webhook with id 0x10+n in pod-a's spool 7.
func claimN(n int) string { return fmt.Sprintf("pod-a/%016x%016x", 7, 0x10+n) }

// A batch's chunks are staged, none stored, until its last; that one
// stores them all in order and says how many; sent again, it is answered
// again and stores nothing more. A chunk of a batch it does not hold, or
// out of its place, is a 409; a batch header whose signature does not
// check, a 403.
func TestHandoffBatchReceived(t *testing.T) {
	p, sp, _, _ := stateProxy(t, proxySecret)
	id := handoff.NewBatchID()
	for i := range 3 {
		w := post(p, "/hook", chunk(claimN(i), handoff.Batch{ID: id, N: i}, proxySecret, proxySecret))
		if w.Code != http.StatusOK || w.Header().Get(handoff.StagedHeader) != string(rune('1'+i)) {
			t.Fatalf("chunk %d: %d staged %q %s", i, w.Code, w.Header().Get(handoff.StagedHeader), w.Body)
		}
		if n := len(queued(t, sp)); n != 0 {
			t.Fatalf("chunk %d: %d stored before the batch's last", i, n)
		}
	}
	// Chunk 2 sent again (its answer was lost): still staged, once.
	if w := post(p, "/hook", chunk(claimN(2), handoff.Batch{ID: id, N: 2}, proxySecret, proxySecret)); w.Code != http.StatusOK ||
		w.Header().Get(handoff.StagedHeader) != "3" {
		t.Fatalf("chunk 2 again: %d %q", w.Code, w.Header().Get(handoff.StagedHeader))
	}
	for range 2 { // the last, and the last sent again after a lost 202
		w := post(p, "/hook", chunk(claimN(2), handoff.Batch{ID: id, N: 2, Last: true}, proxySecret, proxySecret))
		if w.Code != http.StatusAccepted || w.Header().Get(handoff.StoredHeader) != "3" || w.Header().Get("X-Hookpace-Id") == "" {
			t.Fatalf("last: %d stored %q id %q %s", w.Code, w.Header().Get(handoff.StoredHeader), w.Header().Get("X-Hookpace-Id"), w.Body)
		}
	}
	ms := queued(t, sp)
	if len(ms) != 3 {
		t.Fatalf("%d stored, want 3", len(ms))
	}
	for i, m := range ms {
		if m.Ordering != "k" || m.Origin != uint64(0x10+i) || m.OriginSpool != 7 {
			t.Errorf("stored[%d]: ordering %q origin %x/%x", i, m.Ordering, m.OriginSpool, m.Origin)
		}
		for _, h := range []string{handoff.BatchHeader, handoff.BatchSignatureHeader} {
			if m.Header.Get(h) != "" {
				t.Errorf("stored[%d] keeps %s", i, h)
			}
		}
	}
	for _, tt := range []struct {
		name   string
		h      http.Header
		status int
	}{
		{"a chunk of a batch it does not hold", chunk(claimN(5), handoff.Batch{ID: handoff.NewBatchID(), N: 1}, proxySecret, proxySecret), http.StatusConflict},
		{"a last chunk of a batch it does not hold", chunk(claimN(5), handoff.Batch{ID: handoff.NewBatchID(), N: 4, Last: true}, proxySecret, proxySecret), http.StatusConflict},
		{"a batch header signed with another secret", chunk(claimN(5), handoff.Batch{ID: handoff.NewBatchID()}, proxySecret, []byte("another secret, 32 bytes or more.")), http.StatusForbidden},
		{"a batch header that does not parse", func() http.Header {
			h := chunk(claimN(5), handoff.Batch{ID: handoff.NewBatchID()}, proxySecret, proxySecret)
			h.Set(handoff.BatchHeader, "id=zz; n=0")
			return h
		}(), http.StatusBadRequest},
	} {
		if w := post(p, "/hook", tt.h); w.Code != tt.status {
			t.Errorf("%s: %d %s, want %d", tt.name, w.Code, w.Body, tt.status)
		}
	}
	out := handoff.NewBatchID()
	post(p, "/hook", chunk(claimN(6), handoff.Batch{ID: out}, proxySecret, proxySecret))
	if w := post(p, "/hook", chunk(claimN(7), handoff.Batch{ID: out, N: 3}, proxySecret, proxySecret)); w.Code != http.StatusConflict {
		t.Errorf("a chunk out of its place: %d %s", w.Code, w.Body)
	}
	if n := len(queued(t, sp)); n != 3 {
		t.Errorf("%d stored after the refusals, want 3", n)
	}
}
