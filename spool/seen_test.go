package spool

import (
	"context"
	"testing"
	"time"
)

// TestSeen: a key is seen within its scope and host until its window
// ends, in the queue database and after the message is delivered.
func TestSeen(t *testing.T) {
	now := time.Unix(1700000000, 0)
	s := openTest(t, t.TempDir(), Options{Now: func() time.Time { return now }})
	defer s.Close()
	scope := DoorScope("github")
	if s.Seen("app:1", scope, "guid-1") {
		t.Fatal("seen before anything was taken")
	}
	m := newMsg("app:1", 1)
	if how, err := s.AppendKeys(context.Background(), m, 0, Keys{Idempotency: "guid-1", Window: time.Hour, Scope: scope}); err != nil || how != Stored {
		t.Fatalf("append: %v %v", how, err)
	}
	for _, tc := range []struct {
		host, scope, key string
		want             bool
	}{
		{"app:1", scope, "guid-1", true},
		{"app:1", scope, "guid-2", false},
		{"app:1", DoorScope("other"), "guid-1", false},
		{"app:1", "", "guid-1", false},
		{"app:2", scope, "guid-1", false},
		{"app:1", scope, "", false},
	} {
		if got := s.Seen(tc.host, tc.scope, tc.key); got != tc.want {
			t.Errorf("Seen(%q, %q, %q) = %v, want %v", tc.host, tc.scope, tc.key, got, tc.want)
		}
	}
	if err := s.Delete(m); err != nil {
		t.Fatal(err)
	}
	if !s.Seen("app:1", scope, "guid-1") {
		t.Error("not seen once delivered")
	}
	now = now.Add(time.Hour + time.Second)
	if s.Seen("app:1", scope, "guid-1") {
		t.Error("seen after its window")
	}
}
