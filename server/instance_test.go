package server

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestReportTraffic: a minute after the start, one line says what came
// through the proxy, or warns that nothing did; a stop before then says
// nothing.
func TestReportTraffic(t *testing.T) {
	for _, tc := range []struct {
		name   string
		counts map[string]int64
		stop   bool
		want   string
	}{
		{"nothing", map[string]int64{}, false, `level=WARN msg="nothing came through hookpace since it started: is the app's HTTP_PROXY http://127.0.0.1:8080`},
		{"some", map[string]int64{"accepted": 7, "passthrough": 2, "refused": 1}, false,
			`level=INFO msg="traffic since start" since=1m0s requests=10 spooled=7 passthrough=2 other=1`},
		{"stopped first", map[string]int64{}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var buf bytes.Buffer
				log := slog.New(slog.NewTextHandler(&buf, nil))
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				done := make(chan struct{})
				go func() {
					defer close(done)
					reportTraffic(ctx, log, time.Minute, "127.0.0.1:8080", func() map[string]int64 { return tc.counts })
				}()
				time.Sleep(59 * time.Second)
				synctest.Wait()
				if buf.Len() != 0 {
					t.Fatalf("logged before the minute: %s", buf.String())
				}
				if tc.stop {
					cancel()
				}
				<-done
				if got := buf.String(); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
					t.Fatalf("logged %q, want a line with %q", got, tc.want)
				}
			})
		})
	}
}
