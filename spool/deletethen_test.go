package spool

import (
	"context"
	"testing"
)

// TestDeleteThenIsDurable: DeleteThen returns at once and calls done once,
// after every removal is durable: by then the spool counts them gone, and
// a reopened spool does not hold them. On a closed spool done is called
// at once with ErrClosed, and an empty batch is done at once.
func TestDeleteThenIsDurable(t *testing.T) {
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
	done := make(chan error, 2)
	s.DeleteThen(ms[:4], func(err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatalf("done(%v), want nil", err)
	}
	if u := s.HostUsage("a.example"); u.Messages != 1 {
		t.Fatalf("%d messages accounted once done, want 1", u.Messages)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if len(done) != 0 {
		t.Fatal("done was called more than once")
	}
	s = openTest(t, dir, Options{})
	left, err := s.Read("a.example", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].ID != ms[4].ID {
		t.Fatalf("after a restart %d left, want only id %d", len(left), ms[4].ID)
	}
	s.DeleteThen(nil, func(err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatalf("an empty DeleteThen: done(%v), want nil", err)
	}
	s.Close()
	s.DeleteThen(left, func(err error) { done <- err })
	if err := <-done; err != ErrClosed {
		t.Fatalf("DeleteThen on a closed spool: done(%v), want ErrClosed", err)
	}
}
