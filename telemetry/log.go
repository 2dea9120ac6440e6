package telemetry

import (
	"container/list"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// NewLogger returns a logger writing format "text" or "json" (empty means
// text) to w at level "debug", "info", "warn" or "error" (empty means info),
// and the LevelVar behind it, so that a config reload can change the level.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, *slog.LevelVar, error) {
	lv := new(slog.LevelVar)
	if err := SetLevel(lv, level); err != nil {
		return nil, nil, err
	}
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler
	switch strings.ToLower(format) {
	case "", "text":
		h = newTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, nil, fmt.Errorf("log format %q: want text or json", format)
	}
	return slog.New(h), lv, nil
}

// SetLevel sets lv from a level name as NewLogger accepts it; on error lv is
// unchanged. It is what a config reload calls.
func SetLevel(lv *slog.LevelVar, level string) error {
	switch strings.ToLower(level) {
	case "debug":
		lv.Set(slog.LevelDebug)
	case "", "info":
		lv.Set(slog.LevelInfo)
	case "warn":
		lv.Set(slog.LevelWarn)
	case "error":
		lv.Set(slog.LevelError)
	default:
		return fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	return nil
}

// maxThrottleKeys bounds a Throttle's memory.
const maxThrottleKeys = 10000

// Throttle lets through at most one log line per key per interval and
// counts the lines it held back, so that a failure repeated thousands of
// times a second is logged once per interval with how often it recurred:
//
//	if ok, n := th.Allow("deliver:"+host, time.Now()); ok {
//		log.Warn("delivery failed", "host", host, "err", err, "suppressed", n)
//	}
//
// It keeps at most 10,000 keys; past that the key whose line was let
// through longest ago is forgotten (with its count). Safe for concurrent use.
type Throttle struct {
	interval time.Duration
	maxKeys  int

	mu    sync.Mutex
	keys  map[string]*list.Element // of *throttleKey
	order *list.List               // least recently let through first
}

type throttleKey struct {
	key        string
	last       time.Time // when a line was last let through
	suppressed int
}

// NewThrottle returns a Throttle letting one line per key through every
// interval. An interval <= 0 lets every line through.
func NewThrottle(interval time.Duration) *Throttle {
	return newThrottle(interval, maxThrottleKeys)
}

func newThrottle(interval time.Duration, maxKeys int) *Throttle {
	return &Throttle{
		interval: interval,
		maxKeys:  maxKeys,
		keys:     make(map[string]*list.Element),
		order:    list.New(),
	}
}

// Allow reports whether a line for key may be logged at now and, if so, how
// many lines for key it held back since the last one it let through.
func (t *Throttle) Allow(key string, now time.Time) (ok bool, suppressed int) {
	if t.interval <= 0 {
		return true, 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()

	if el, found := t.keys[key]; found {
		k := el.Value.(*throttleKey)
		if now.Sub(k.last) < t.interval {
			k.suppressed++
			return false, 0
		}
		suppressed = k.suppressed
		k.last, k.suppressed = now, 0
		t.order.MoveToBack(el)
		return true, suppressed
	}

	for t.order.Len() >= t.maxKeys {
		oldest := t.order.Front()
		delete(t.keys, oldest.Value.(*throttleKey).key)
		t.order.Remove(oldest)
	}
	t.keys[key] = t.order.PushBack(&throttleKey{key: key, last: now})
	return true, 0
}
