package spool

import (
	"context"
	"sync"
	"testing"
)

// An idempotency key reused, within its window, for another
// request (here another body) is a Conflict, answered with the first
// one's id, and stores nothing; the same request again is a Duplicate.
// Concurrent appends of one key in one round are told apart the same way.
func TestIdempotencyKeyReusedForAnotherBody(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	defer s.Close()
	k := Keys{Idempotency: "evt_1", Window: 3600e9}
	first, how := appendKeys(t, s, "aaa", k)
	if how != Stored {
		t.Fatalf("first: %v", how)
	}
	if m, how := appendKeys(t, s, "bbb", k); how != Conflict || m.ID != first.ID {
		t.Fatalf("another body: %v id %d, want Conflict with %d", how, m.ID, first.ID)
	}
	if m, how := appendKeys(t, s, "aaa", k); how != Duplicate || m.ID != first.ID {
		t.Fatalf("the same body: %v id %d, want Duplicate with %d", how, m.ID, first.ID)
	}
	if n := len(readAll(t, s)); n != 1 {
		t.Fatalf("%d queued, want 1", n)
	}

	// Eight at once, two bodies: one is stored; each other is a Duplicate
	// if it has the stored one's body, else a Conflict.
	k.Idempotency = "evt_2"
	type result struct {
		body string
		how  Appended
	}
	res := make([]result, 8)
	var wg sync.WaitGroup
	for i := range res {
		body := []string{"ccc", "ddd"}[i%2]
		wg.Go(func() {
			m := newMsg("a.example", 3)
			m.Body = []byte(body)
			how, err := s.AppendKeys(context.Background(), m, 0, k)
			if err != nil {
				t.Error(err)
			}
			res[i] = result{body, how}
		})
	}
	wg.Wait()
	stored := ""
	for _, r := range res {
		if r.how == Stored {
			if stored != "" {
				t.Fatalf("two stored: %+v", res)
			}
			stored = r.body
		}
	}
	for _, r := range res {
		if r.how != Stored && (r.how == Duplicate) != (r.body == stored) {
			t.Errorf("%s after %s was stored: %v", r.body, stored, r.how)
		}
	}
}
