package spool

import "testing"

// Keys of one scope never reach another scope's webhooks: a coalesce key
// replaces only its own scope's queued webhook, and an idempotency key
// answers only its own scope's id.
func TestKeysScoped(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	defer s.Close()
	b, how := appendKeys(t, s, "b-content", Keys{Coalesce: "order-42", Scope: "tenant-b"})
	if how != Stored {
		t.Fatalf("b: %v", how)
	}
	a, how := appendKeys(t, s, "a-content", Keys{Coalesce: "order-42", Scope: "tenant-a"})
	if how != Stored || a.ID == b.ID {
		t.Fatalf("a's update of b's key: %v id %d (b's %d), want stored anew", how, a.ID, b.ID)
	}
	if _, how := appendKeys(t, s, "b-v2", Keys{Coalesce: "order-42", Scope: "tenant-b"}); how != Coalesced {
		t.Fatalf("b's own update: %v, want coalesced", how)
	}
	ms := readAll(t, s)
	if len(ms) != 2 || ms[0].ID != b.ID || string(ms[0].Body) != "b-v2" || string(ms[1].Body) != "a-content" {
		t.Fatalf("queue: %d messages", len(ms))
	}

	ib, how := appendKeys(t, s, "evt-8 of b", Keys{Idempotency: "evt-8", Window: 3600e9, Scope: "tenant-b"})
	if how != Stored {
		t.Fatalf("b's evt-8: %v", how)
	}
	// The same request from a: neither b's id nor a conflict with it.
	if m, how := appendKeys(t, s, "evt-8 of b", Keys{Idempotency: "evt-8", Window: 3600e9, Scope: "tenant-a"}); how != Stored || m.ID == ib.ID {
		t.Fatalf("a's evt-8: %v id %d, b's is %d", how, m.ID, ib.ID)
	}
	if m, how := appendKeys(t, s, "evt-8 of b", Keys{Idempotency: "evt-8", Window: 3600e9, Scope: "tenant-b"}); how != Duplicate || m.ID != ib.ID {
		t.Fatalf("b's repeat: %v id %d, want duplicate of %d", how, m.ID, ib.ID)
	}
	if m, how := appendKeys(t, s, "evt-8 of b", Keys{Idempotency: "evt-8", Window: 3600e9}); how != Stored || m.ID == ib.ID {
		t.Fatalf("no scope: %v id %d, want stored anew", how, m.ID)
	}
}

// A record kept before keys had scopes (as a spool without proxy auth
// keeps them) still makes the very same request a duplicate once auth is
// on, and nothing else.
func TestKeysScopedUpgrade(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	defer s.Close()
	old, how := appendKeys(t, s, "evt-9 body", Keys{Idempotency: "evt-9", Window: 3600e9})
	if how != Stored {
		t.Fatalf("unscoped: %v", how)
	}
	if m, how := appendKeys(t, s, "evt-9 body", Keys{Idempotency: "evt-9", Window: 3600e9, Scope: "tenant-a"}); how != Duplicate || m.ID != old.ID {
		t.Fatalf("the same request, scoped: %v id %d, want duplicate of %d", how, m.ID, old.ID)
	}
	if m, how := appendKeys(t, s, "another body", Keys{Idempotency: "evt-9", Window: 3600e9, Scope: "tenant-b"}); how != Stored || m.ID == old.ID {
		t.Fatalf("another request, scoped: %v id %d, want stored anew (not a conflict with %d)", how, m.ID, old.ID)
	}
}
