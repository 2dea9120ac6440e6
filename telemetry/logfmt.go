package telemetry

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// textHandler writes exactly what slog's TextHandler writes, faster for the
// lines hookpace logs on every request and every delivery attempt: records
// whose attributes are all strings, numbers, booleans or durations, on a
// handler without WithAttrs or WithGroup. It formats them in one pass into
// a pooled buffer; slog's TextHandler spent ~6.5 µs of CPU on each ingest
// line, a tenth of what hookpace spends on the whole request. Any other
// record goes to slog's TextHandler, and TestTextHandlerMatchesSlog holds
// the two to the same output.
type textHandler struct {
	slog.Handler // slog's TextHandler on the same writer
	w            *lockedWriter
}

// lockedWriter serializes writes, so that the fast path and slog's
// handler never interleave within a line.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func newTextHandler(w io.Writer, opts *slog.HandlerOptions) *textHandler {
	lw := &lockedWriter{w: w}
	return &textHandler{Handler: slog.NewTextHandler(lw, opts), w: lw}
}

var textBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func (h *textHandler) Handle(ctx context.Context, r slog.Record) error {
	bp := textBufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 64<<10 { // a rare huge line is not kept
			textBufs.Put(bp)
		}
	}()
	b := (*bp)[:0]
	if !r.Time.IsZero() {
		b = append(b, "time="...)
		b = appendRFC3339Millis(b, r.Time)
		b = append(b, ' ')
	}
	b = append(b, "level="...)
	b = appendTextString(b, r.Level.String())
	b = append(b, " msg="...)
	b = appendTextString(b, r.Message)
	simple := true
	r.Attrs(func(a slog.Attr) bool {
		b, simple = appendTextAttr(b, a)
		return simple
	})
	if !simple {
		return h.Handler.Handle(ctx, r)
	}
	b = append(b, '\n')
	*bp = b
	_, err := h.w.Write(b)
	return err
}

// WithAttrs and WithGroup leave the fast path: hookpace's hot lines use
// neither.
func (h *textHandler) WithAttrs(as []slog.Attr) slog.Handler { return h.Handler.WithAttrs(as) }
func (h *textHandler) WithGroup(name string) slog.Handler    { return h.Handler.WithGroup(name) }

// appendTextAttr appends " key=value" as slog's TextHandler would, or
// reports false for an attribute the fast path leaves to slog.
func appendTextAttr(b []byte, a slog.Attr) ([]byte, bool) {
	if a.Key == "" {
		return b, false // slog drops some empty attributes and not others
	}
	b = append(b, ' ')
	b = appendTextString(b, a.Key)
	b = append(b, '=')
	v := a.Value
	switch v.Kind() {
	case slog.KindString:
		b = appendTextString(b, v.String())
	case slog.KindInt64:
		b = strconv.AppendInt(b, v.Int64(), 10)
	case slog.KindUint64:
		b = strconv.AppendUint(b, v.Uint64(), 10)
	case slog.KindFloat64:
		b = strconv.AppendFloat(b, v.Float64(), 'g', -1, 64)
	case slog.KindBool:
		b = strconv.AppendBool(b, v.Bool())
	case slog.KindDuration:
		b = append(b, v.Duration().String()...)
	default:
		return b, false
	}
	return b, true
}

// appendTextString appends s, quoted when slog's TextHandler would quote it.
func appendTextString(b []byte, s string) []byte {
	if textNeedsQuoting(s) {
		return strconv.AppendQuote(b, s)
	}
	return append(b, s...)
}

// textNeedsQuoting follows slog's rule: quote an empty string, a space, '=',
// '"', an ASCII control character (DEL is not one here), and any rune that
// is invalid, a space or not printable. (A backslash alone needs no quotes.)
func textNeedsQuoting(s string) bool {
	if s == "" {
		return true
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if quoteASCII[c] {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return true
		}
		i += size
	}
	return false
}

// quoteASCII marks the ASCII bytes that make slog quote a string.
var quoteASCII = func() (t [utf8.RuneSelf]bool) {
	for c := range t {
		t[c] = c <= ' ' || c == '=' || c == '"'
	}
	return t
}()

// appendRFC3339Millis formats t as slog does for a record's time:
// RFC 3339 with exactly three digits of milliseconds.
func appendRFC3339Millis(b []byte, t time.Time) []byte {
	// RFC3339Nano trims trailing zeros; adding a tenth of a millisecond
	// keeps four digits, and the fourth is dropped.
	const prefixLen = len("2006-01-02T15:04:05.000")
	n := len(b)
	t = t.Truncate(time.Millisecond).Add(time.Millisecond / 10)
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b[:n+prefixLen], b[n+prefixLen+1:]...)
}
