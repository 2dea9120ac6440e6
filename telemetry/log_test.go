package telemetry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestThrottle(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	type step struct {
		key        string
		now        time.Time
		ok         bool
		suppressed int
	}
	for _, tc := range []struct {
		name     string
		interval time.Duration
		maxKeys  int
		steps    []step
	}{
		{"one line per interval, with the count held back", 10 * time.Second, maxThrottleKeys, []step{
			{"a", at(0), true, 0},
			{"a", at(time.Second), false, 0},
			{"a", at(9 * time.Second), false, 0},
			{"b", at(9 * time.Second), true, 0}, // keys are independent
			{"a", at(10 * time.Second), true, 2},
			{"a", at(15 * time.Second), false, 0},
			{"a", at(25 * time.Second), true, 1}, // interval runs from the last line let through
			{"a", at(40 * time.Second), true, 0},
			{"b", at(40 * time.Second), true, 0},
		}},
		{"interval <= 0 lets everything through", 0, maxThrottleKeys, []step{
			{"a", at(0), true, 0},
			{"a", at(0), true, 0},
		}},
		{"clock going backwards stays throttled", time.Minute, maxThrottleKeys, []step{
			{"a", at(time.Hour), true, 0},
			{"a", at(0), false, 0},
			{"a", at(time.Hour + time.Minute), true, 1},
		}},
		{"oldest key evicted past the bound", time.Minute, 2, []step{
			{"a", at(0), true, 0},
			{"b", at(time.Second), true, 0},
			{"a", at(2 * time.Second), false, 0},
			{"c", at(3 * time.Second), true, 0}, // evicts a, whose line is oldest
			{"b", at(4 * time.Second), false, 0},
			{"a", at(5 * time.Second), true, 0}, // forgotten, so let through; evicts b
			{"c", at(6 * time.Second), false, 0},
			{"b", at(7 * time.Second), true, 0},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			th := newThrottle(tc.interval, tc.maxKeys)
			for i, s := range tc.steps {
				ok, n := th.Allow(s.key, s.now)
				if ok != s.ok || n != s.suppressed {
					t.Errorf("step %d: Allow(%q, +%v) = %v, %d; want %v, %d",
						i, s.key, s.now.Sub(t0), ok, n, s.ok, s.suppressed)
				}
			}
			if len(th.keys) > tc.maxKeys || th.order.Len() != len(th.keys) {
				t.Errorf("%d keys, %d in order; bound %d", len(th.keys), th.order.Len(), tc.maxKeys)
			}
		})
	}
}

func TestNewThrottleBound(t *testing.T) {
	th := NewThrottle(time.Minute)
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range maxThrottleKeys + 50 {
		th.Allow("key"+strconv.Itoa(i), now)
	}
	if len(th.keys) != maxThrottleKeys {
		t.Errorf("%d keys, want %d", len(th.keys), maxThrottleKeys)
	}
}

func TestNewLoggerJSON(t *testing.T) {
	var buf bytes.Buffer
	log, lv, err := NewLogger(&buf, "json", "info")
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("hidden")
	log.Info("delivered", "host", "a.example", "status", 200)
	lv.Set(slog.LevelDebug)
	log.Debug("shown")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2:\n%s", len(lines), buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatalf("%q: %v", lines[0], err)
	}
	for _, key := range []string{"time", "level", "msg", "host", "status"} {
		if _, ok := rec[key]; !ok {
			t.Errorf("record %s has no key %q", lines[0], key)
		}
	}
	if rec["level"] != "INFO" || rec["msg"] != "delivered" || rec["host"] != "a.example" {
		t.Errorf("record %s", lines[0])
	}
	if !strings.Contains(lines[1], `"msg":"shown"`) {
		t.Errorf("after raising the level: %s", lines[1])
	}
}

func TestNewLoggerOptions(t *testing.T) {
	var buf bytes.Buffer
	log, lv, err := NewLogger(&buf, "", "")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hello", "k", "v")
	if got := buf.String(); !strings.Contains(got, "level=INFO msg=hello k=v") {
		t.Errorf("text output %q", got)
	}
	if lv.Level() != slog.LevelInfo {
		t.Errorf("default level %v", lv.Level())
	}
	if err := SetLevel(lv, "WARN"); err != nil || lv.Level() != slog.LevelWarn {
		t.Errorf("SetLevel(WARN): %v, level %v", err, lv.Level())
	}
	if err := SetLevel(lv, "verbose"); err == nil || lv.Level() != slog.LevelWarn {
		t.Errorf("SetLevel(verbose): %v, level %v; want an error and no change", err, lv.Level())
	}
	if _, _, err := NewLogger(&buf, "logfmt", "info"); err == nil {
		t.Error("format logfmt accepted")
	}
	if _, _, err := NewLogger(&buf, "json", "trace"); err == nil {
		t.Error("level trace accepted")
	}
}

func TestBufferedWriterKeepsWholeLinesInOrder(t *testing.T) {
	var out bytes.Buffer
	b := NewBufferedWriter(&out, time.Hour) // only explicit flushes
	for i := range 5000 {
		fmt.Fprintf(b, "line %d\n", i)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 5000 {
		t.Fatalf("%d lines, want 5000", len(lines))
	}
	for i, l := range lines {
		if l != fmt.Sprintf("line %d", i) {
			t.Fatalf("line %d is %q", i, l)
		}
	}
}
