package spool

import (
	"context"
	"testing"
)

// TestDeleteAllIsDurable: a batch's members, deleted together, are gone
// from a reopened spool and from its accounting; the others stay.
func TestDeleteAllIsDurable(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{})
	var ms []*Message
	for i := range 5 {
		m := newMsg("a.example", i)
		if err := s.Append(context.Background(), m, 0); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	if err := s.DeleteAll(ms[:4]); err != nil {
		t.Fatal(err)
	}
	if u := s.HostUsage("a.example"); u.Messages != 1 {
		t.Fatalf("%d messages accounted after DeleteAll of 4 of 5, want 1", u.Messages)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, Options{})
	defer s.Close()
	left, err := s.Read("a.example", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].ID != ms[4].ID {
		t.Fatalf("after a restart %d left, want only id %d", len(left), ms[4].ID)
	}
	if err := s.DeleteAll(left); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := s.DeleteAll(left); err != ErrClosed {
		t.Fatalf("DeleteAll on a closed spool: %v, want ErrClosed", err)
	}
}
