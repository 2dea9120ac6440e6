package fleet

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/hookpace/hookpace/internal/redistest"
)

// A Redis that answers OOM is not "unreachable": the degraded
// line says Redis answered with an error, and what it said.
func TestRedisErrorReplyIsLoggedAsSuch(t *testing.T) {
	srv, clk := redistest.Start(t), newClock()
	a := newLimiter(t, srv, clk, "a")
	var log bytes.Buffer
	a.log = slog.New(slog.NewTextHandler(&log, nil))
	ctx := context.Background()
	if err := a.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := a.rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	// Redis lets the limiter's scripts run past maxmemory; a plain write
	// gets the OOM answer that the limiter's calls can get.
	oom := a.rdb.Set(ctx, "t:x", "y", 0).Err()
	if oom == nil || !strings.HasPrefix(oom.Error(), "OOM") {
		t.Fatalf("SET with Redis out of memory: %v, want its OOM", oom)
	}
	a.fail(oom)
	got := log.String()
	if !strings.Contains(got, "redis answered with an error") || !strings.Contains(got, "OOM") || strings.Contains(got, "unreachable") {
		t.Errorf("the degraded line does not say what Redis said:\n%s", got)
	}
}
