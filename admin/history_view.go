package admin

import (
	"html/template"
	"strconv"
)

// The history as inline SVG (history.go): step lines drawn as paths of
// relative h and v moves, one unit of x a sample, so that a quiet series
// is a few bytes and nothing on the page needs a script or a library.

const (
	chartHeight = 60 // the spool's charts, in viewBox units
	sparkHeight = 18 // a host's sparkline
)

// chartsView is the spool's charts: accepted and delivered per second on
// one scale, the queue on another, over the last HistorySpan.
type chartsView struct {
	Slots, Height                 int
	Accepted, Delivered, Queued   string // the paths
	RateTop, QueuedTop            int64  // the top of each chart's scale
	AcceptedNow, DeliveredNow     int64  // the last second's
	QueuedNow                     int64
	AcceptedTotal, DeliveredTotal int64  // over the samples held
	Seconds                       int    // samples held
	Span                          string // how long they cover
}

func newChartsView(h *History) *chartsView {
	if h == nil {
		return nil
	}
	s := h.Spool()
	v := &chartsView{Slots: spoolSlots, Height: chartHeight, Seconds: len(s.Queued)}
	v.AcceptedTotal, v.AcceptedNow = sumLast(s.Accepted)
	v.DeliveredTotal, v.DeliveredNow = sumLast(s.Delivered)
	_, v.QueuedNow = sumLast(s.Queued)
	v.RateTop = max(top(s.Accepted), top(s.Delivered), 1)
	v.QueuedTop = max(top(s.Queued), 1)
	v.Accepted = string(stepPath(nil, s.Accepted, spoolSlots, chartHeight, v.RateTop))
	v.Delivered = string(stepPath(nil, s.Delivered, spoolSlots, chartHeight, v.RateTop))
	v.Queued = string(stepPath(nil, s.Queued, spoolSlots, chartHeight, v.QueuedTop))
	v.Span = spanText(v.Seconds)
	return v
}

// hostTrend appends host's sparkline: its queue and its deliveries over
// the last HistorySpan, each on its own scale; false without a history.
func (h *History) hostTrend(host string, b []byte) ([]byte, bool) {
	if h == nil {
		return b, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	hh := h.hosts[host]
	if hh == nil || hh.samples.len() == 0 {
		return b, false
	}
	var qb, db [hostSlots]uint16
	q, d := hh.samples.appendTo(qb[:0], db[:0])
	qTop := top(q)
	_, qNow := sumLast(q)
	dSum, _ := sumLast(d)
	dTop := top(d)
	b = append(b, `<svg class="spark" role="img" width="120" height="24" viewBox="0 0 90 18" preserveAspectRatio="none" data-queued="`...)
	b = strconv.AppendInt(b, int64(qNow), 10)
	b = append(b, `" data-queued-max="`...)
	b = strconv.AppendInt(b, int64(qTop), 10)
	b = append(b, `" data-delivered="`...)
	b = strconv.AppendInt(b, int64(dSum), 10)
	b = append(b, `" aria-label="last 15 min: queued now `...)
	b = strconv.AppendInt(b, int64(qNow), 10)
	b = append(b, `, at most `...)
	b = strconv.AppendInt(b, int64(qTop), 10)
	b = append(b, `; `...)
	b = strconv.AppendInt(b, int64(dSum), 10)
	b = append(b, ` delivered"><path class="d" d="`...)
	b = stepPath(b, d, hostSlots, sparkHeight, max(dTop, 1))
	b = append(b, `"/><path class="q" d="`...)
	b = stepPath(b, q, hostSlots, sparkHeight, max(qTop, 1))
	return append(b, `"/></svg>`...), true
}

// trendHTML is host's sparkline as markup for the hosts table; buf is
// reused from row to row.
func (h *History) trendHTML(host string, buf []byte) (template.HTML, []byte) {
	b, ok := h.hostTrend(host, buf[:0])
	if !ok {
		return "", b
	}
	return template.HTML(b), b
}

// spanText says how long n seconds of samples cover: "15 min", "42 s".
func spanText(n int) string {
	if n < 60 {
		return strconv.Itoa(n) + " s"
	}
	return strconv.Itoa(n/60) + " min"
}

type sample interface{ ~int64 | ~uint16 }

// stepPath appends the path of vals as a step line, right-aligned in
// slots units of x, top drawn at y 1 and zero at height-1: a move to the
// first sample, then relative h and v moves at each change (the fewest
// bytes: a row of the 5,000-host page carries two).
func stepPath[T sample](b []byte, vals []T, slots, height int, top T) []byte {
	if len(vals) == 0 {
		return b
	}
	// 1 unit clear above and below, so that the stroke is not cut.
	span := int64(height - 2)
	y := func(v T) int64 { return 1 + span - int64(v)*span/int64(top) }
	x := int64(slots - len(vals))
	b = append(b, 'M')
	b = strconv.AppendInt(b, x, 10)
	b = append(b, ' ')
	prev := y(vals[0])
	b = strconv.AppendInt(b, prev, 10)
	for i, v := range vals[1:] {
		if cur := y(v); cur != prev {
			at := int64(slots-len(vals)+i) + 1
			b = append(b, 'h')
			b = strconv.AppendInt(b, at-x, 10)
			b = append(b, 'v')
			b = strconv.AppendInt(b, cur-prev, 10)
			x, prev = at, cur
		}
	}
	b = append(b, 'h')
	return strconv.AppendInt(b, int64(slots)-x, 10)
}

func top[T sample](vals []T) T {
	var m T
	for _, v := range vals {
		m = max(m, v)
	}
	return m
}

// sumLast is the sum of vals and the last of them.
func sumLast[T sample](vals []T) (sum int64, last T) {
	for _, v := range vals {
		sum += int64(v)
	}
	if len(vals) > 0 {
		last = vals[len(vals)-1]
	}
	return sum, last
}
