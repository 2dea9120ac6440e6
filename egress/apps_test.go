package egress

import (
	"context"
	"testing"
)

// TestApps: an inbound route's app opens exactly its host and port, as
// spelled in its URL, and never a listener of hookpace's own.
func TestApps(t *testing.T) {
	g := mustNew(t, Options{
		Apps: []string{"127.0.0.1:3000", "app.internal:8080", "[::1]:4000"},
		Self: []string{"127.0.0.1:3000"},
		Resolver: static(map[string][]string{
			"app.internal": {"10.0.0.5"}, "other.internal": {"10.0.0.5"}, "localhost": {"127.0.0.1"},
		}),
	})
	g2 := mustNew(t, Options{
		Apps:     []string{"127.0.0.1:3000", "app.internal:8080", "[::1]:4000"},
		Resolver: static(map[string][]string{"app.internal": {"10.0.0.5"}, "other.internal": {"10.0.0.5"}, "localhost": {"127.0.0.1"}}),
	})
	for _, c := range []struct {
		g       *Guard
		host    string
		port    uint16
		allowed bool
	}{
		{g, "127.0.0.1", 3000, false}, // hookpace's own listener wins
		{g2, "127.0.0.1", 3000, true},
		{g2, "::ffff:127.0.0.1", 3000, true},
		{g2, "127.0.0.1", 3001, false},
		{g2, "127.0.0.1", 22, false},
		{g2, "localhost", 3000, false}, // another spelling: not opened
		{g2, "app.internal", 8080, true},
		{g2, "APP.internal.", 8080, true},
		{g2, "app.internal", 8081, false},
		{g2, "other.internal", 8080, false},
		{g2, "10.0.0.5", 8080, false},
		{g2, "::1", 4000, true},
		{g2, "::1", 3000, false},
	} {
		_, err := c.g.CheckPort(context.Background(), c.host, c.port)
		if (err == nil) != c.allowed {
			t.Errorf("%s port %d: %v, want allowed %v", c.host, c.port, err, c.allowed)
		}
	}
	for _, bad := range []string{"127.0.0.1", "app:0", "app:x"} {
		if _, err := New(Options{Apps: []string{bad}}); err == nil {
			t.Errorf("Apps %q accepted", bad)
		}
	}
}
