package spool

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// The warning at dedupe.max_keys named spool.dedupe_max_keys,
// which no config has. It names the settings as the config does.
func TestKeysFullWarningNamesTheSettings(t *testing.T) {
	var log bytes.Buffer
	s := openTest(t, t.TempDir(), Options{DedupeMaxKeys: 1, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	defer s.Close()
	for i, k := range []string{"a", "b"} {
		if _, err := s.AppendOnce(context.Background(), newMsg("a.example", i), 0, k, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	got := log.String()
	if !strings.Contains(got, "dedupe.max_keys") || !strings.Contains(got, "dedupe.max_bytes") || strings.Contains(got, "spool.dedupe") {
		t.Errorf("the warning does not name dedupe.max_keys and dedupe.max_bytes:\n%s", got)
	}
}
