package telemetry

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestTextHandlerMatchesSlog: the fast text handler writes byte for byte
// what slog's TextHandler writes, for the kinds it formats itself and for
// those it leaves to slog.
func TestTextHandlerMatchesSlog(t *testing.T) {
	strs := []string{"", "a", "accepted", "api.partner.example:8443", "127.0.0.1:54321", "two words", "k=v",
		`say "hi"`, `back\slash`, "tab\there", "new\nline", "nul\x00", "del\x7f", "héllo", "日本", "non\u00a0breaking",
		"bad\xffutf8", "emoji 🙂", "🙂", "-", "=", `"`, "{}", "[a]", "x,y;z", "0000000000000001"}
	levels := []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError, slog.LevelInfo + 2, slog.LevelDebug - 3}
	times := []time.Time{time.Time{}, time.Date(2026, 11, 21, 23, 1, 15, 0, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 999_999_999, time.FixedZone("x", -7*3600)), time.Unix(0, 123_456_789).UTC()}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func() slog.Attr {
		key := strs[rng.IntN(len(strs))]
		switch rng.IntN(10) {
		case 0:
			return slog.Int64(key, rng.Int64()-rng.Int64())
		case 1:
			return slog.Uint64(key, rng.Uint64())
		case 2:
			return slog.Bool(key, rng.IntN(2) == 0)
		case 3:
			return slog.Duration(key, time.Duration(rng.Int64N(int64(time.Hour))))
		case 4:
			return slog.Int(key, rng.IntN(600))
		case 6:
			return slog.Float64(key, []float64{0, 1.5, -2.25e-7, 1e21, rng.Float64() * 1e6, float64(rng.IntN(5000)) / 1000}[rng.IntN(6)])
		case 5: // kinds left to slog
			switch rng.IntN(5) {
			case 0:
				return slog.Any(key, []int{1, 2})
			case 1:
				return slog.Any(key, errors.New(strs[rng.IntN(len(strs))]))
			case 2:
				return slog.Time(key, times[1+rng.IntN(len(times)-1)])
			case 3:
				return slog.Group(key, slog.String("in", "side"))
			default:
				return slog.Any(key, nil)
			}
		default:
			return slog.String(key, strs[rng.IntN(len(strs))])
		}
	}
	for i := range 5000 {
		r := slog.NewRecord(times[rng.IntN(len(times))], levels[rng.IntN(len(levels))], strs[rng.IntN(len(strs))], 0)
		for range rng.IntN(10) {
			r.AddAttrs(pick())
		}
		var want, got bytes.Buffer
		opts := &slog.HandlerOptions{Level: slog.LevelDebug - 10}
		if err := slog.NewTextHandler(&want, opts).Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if err := newTextHandler(&got, opts).Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Fatalf("record %d:\n got %q\nwant %q", i, got.String(), want.String())
		}
	}
}

// TestTextHandlerWithAttrsAndGroups: handlers derived with WithAttrs or
// WithGroup write what slog's do.
func TestTextHandlerWithAttrsAndGroups(t *testing.T) {
	var want, got bytes.Buffer
	for _, c := range []struct {
		buf *bytes.Buffer
		log *slog.Logger
	}{
		{&want, slog.New(slog.NewTextHandler(&want, nil))},
		{&got, slog.New(newTextHandler(&got, nil))},
	} {
		c.log.With("component", "spool").WithGroup("g").Info("x", "a", 1, "b", "two words")
		c.log.Info("plain", "n", 2)
	}
	strip := func(s string) string { // the time differs between the two loggers
		var out []string
		for _, line := range strings.Split(s, "\n") {
			if _, rest, ok := strings.Cut(line, " "); ok {
				out = append(out, rest)
			}
		}
		return strings.Join(out, "\n")
	}
	if strip(got.String()) != strip(want.String()) {
		t.Fatalf("got\n%s\nwant\n%s", got.String(), want.String())
	}
}

func BenchmarkIngestLogLine(b *testing.B) {
	for _, c := range []struct {
		name string
		h    func() slog.Handler
	}{
		{"slog", func() slog.Handler { return slog.NewTextHandler(discard{}, nil) }},
		{"fast", func() slog.Handler { return newTextHandler(discard{}, nil) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			log := slog.New(c.h())
			ctx := context.Background()
			attrs := []slog.Attr{slog.String("decision", "accepted"), slog.Int("status", 202),
				slog.String("method", "POST"), slog.String("host", "api.partner.example"), slog.Int("bytes", 1024),
				slog.Int64("duration_us", 1834), slog.String("remote", "127.0.0.1:54321"), slog.String("id", "00000000000a1b2c")}
			b.Run("Logger", func(b *testing.B) {
				for b.Loop() {
					log.LogAttrs(ctx, slog.LevelInfo, "ingest", attrs...)
				}
			})
			b.Run("Handle", func(b *testing.B) { // as Log does, without looking up the caller
				for b.Loop() {
					r := slog.NewRecord(time.Now(), slog.LevelInfo, "ingest", 0)
					r.AddAttrs(attrs...)
					log.Handler().Handle(ctx, r)
				}
			})
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
