package admin

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/deliver"
)

func TestRingKeepsTheLastSamplesOldestFirst(t *testing.T) {
	r := newRing[int64](4)
	if got := r.appendTo(nil); len(got) != 0 {
		t.Fatalf("empty ring: %v", got)
	}
	for i := range int64(3) {
		r.push(i + 1)
	}
	if got := r.appendTo(nil); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("3 of 4: %v", got)
	}
	for i := range int64(7) {
		r.push(10 + i)
	}
	if got := r.appendTo(nil); !slices.Equal(got, []int64{13, 14, 15, 16}) {
		t.Fatalf("wrapped: %v, want the last 4", got)
	}
}

// fakeSource is what the sampler reads, set by the test between samples.
type fakeSource struct {
	accepted, delivered, queued int64
	hosts                       []deliver.HostGauge
	hostReads                   int
}

func (f *fakeSource) source() HistorySource {
	return HistorySource{
		Accepted:  func() int64 { return f.accepted },
		Delivered: func() int64 { return f.delivered },
		Queued:    func() int64 { return f.queued },
		Hosts: func() []deliver.HostGauge {
			f.hostReads++
			return slices.Clone(f.hosts)
		},
	}
}

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func TestHistorySamplesTheSpoolEverySecond(t *testing.T) {
	f := &fakeSource{accepted: 100, delivered: 40}
	h := NewHistory(f.source())
	h.Sample(t0) // the baseline: counts before it are not charted
	f.accepted, f.delivered, f.queued = 110, 43, 67
	h.Sample(t0.Add(time.Second))
	h.Sample(t0.Add(1500 * time.Millisecond)) // within the same second: nothing
	f.accepted, f.delivered, f.queued = 120, 43, 77
	h.Sample(t0.Add(2 * time.Second))
	// Three seconds missed: 9 accepted spread over them, the depth repeated.
	f.accepted, f.delivered, f.queued = 129, 50, 79
	h.Sample(t0.Add(5 * time.Second))
	s := h.Spool()
	if want := []int64{10, 10, 3, 3, 3}; !slices.Equal(s.Accepted, want) {
		t.Errorf("accepted per second %v, want %v", s.Accepted, want)
	}
	if want := []int64{3, 0, 2, 2, 3}; !slices.Equal(s.Delivered, want) {
		t.Errorf("delivered per second %v, want %v", s.Delivered, want)
	}
	if want := []int64{67, 77, 79, 79, 79}; !slices.Equal(s.Queued, want) {
		t.Errorf("queued %v, want %v", s.Queued, want)
	}
	// An hour later: the whole span is one gap, at most 900 samples.
	f.accepted = 129 + 3600
	h.Sample(t0.Add(time.Hour + 5*time.Second))
	s = h.Spool()
	if len(s.Accepted) != spoolSlots || s.Accepted[0] != 4 || s.Accepted[spoolSlots-1] != 4 {
		t.Errorf("after an hour: %d samples, first %d, last %d; want 900 of 4/s", len(s.Accepted), s.Accepted[0], s.Accepted[spoolSlots-1])
	}
}

func TestHistorySamplesHostsEvery10sAndForgetsThem(t *testing.T) {
	f := &fakeSource{hosts: []deliver.HostGauge{{Host: "a.example", Queued: 5, Delivered: 2}}}
	h := NewHistory(f.source())
	h.Sample(t0) // a step boundary: the hosts are read
	for i := 1; i <= 9; i++ {
		h.Sample(t0.Add(time.Duration(i) * time.Second))
	}
	if f.hostReads != 1 {
		t.Fatalf("hosts read %d times in 10 s, want once", f.hostReads)
	}
	f.hosts = []deliver.HostGauge{{Host: "a.example", Queued: 70000, Delivered: 9}, {Host: "b.example", Queued: 1, Delivered: 4}}
	h.Sample(t0.Add(10 * time.Second))
	// 30 s later, a.example forgotten by the dispatcher in between and
	// taken up again (its count starts again), b.example forgotten.
	f.hosts = []deliver.HostGauge{{Host: "a.example", Queued: 3, Delivered: 6}}
	h.Sample(t0.Add(40 * time.Second))
	a, ok := h.Host("a.example")
	if !ok {
		t.Fatal("a.example has no history")
	}
	if want := []uint16{5, 65535, 3, 3, 3}; !slices.Equal(a.Queued, want) {
		t.Errorf("a.example queued %v, want %v (saturated at 65,535, repeated over the gap)", a.Queued, want)
	}
	if want := []uint16{2, 7, 2, 2, 2}; !slices.Equal(a.Delivered, want) {
		t.Errorf("a.example delivered %v, want %v", a.Delivered, want)
	}
	if _, ok := h.Host("b.example"); ok || h.Hosts() != 1 {
		t.Errorf("b.example kept after the dispatcher forgot it (%d hosts)", h.Hosts())
	}
	if f.hostReads != 3 {
		t.Errorf("hosts read %d times, want 3", f.hostReads)
	}
}

func TestHistoryHostsAreBounded(t *testing.T) {
	f := &fakeSource{}
	for i := range 5000 {
		f.hosts = append(f.hosts, deliver.HostGauge{Host: fmt.Sprintf("h%d.example", i), Queued: int64(i), Delivered: int64(i)})
	}
	h := NewHistory(f.source())
	for i := range 200 { // 2,000 s: more than the span
		for j := range f.hosts {
			f.hosts[j].Delivered += int64(j % 7)
		}
		h.Sample(t0.Add(time.Duration(i) * HostStep))
	}
	if h.Hosts() != 5000 {
		t.Fatalf("%d hosts", h.Hosts())
	}
	hh, _ := h.Host("h4999.example")
	if len(hh.Queued) != hostSlots || len(hh.Delivered) != hostSlots || hh.Delivered[hostSlots-1] != 4999%7 {
		t.Errorf("%d and %d samples, last delivered %d; want %d each", len(hh.Queued), len(hh.Delivered), hh.Delivered[hostSlots-1], hostSlots)
	}
	if c := cap(h.hosts["h1.example"].samples.v); c != hostSlots {
		t.Errorf("a host's ring holds %d, want %d", c, hostSlots)
	}
}

func TestStepPath(t *testing.T) {
	for _, c := range []struct {
		vals []int64
		top  int64
		want string
	}{
		{nil, 1, ""},
		{[]int64{0, 0, 0}, 1, "M7 9h3"},
		{[]int64{0, 5, 5, 10}, 10, "M6 9h1v-4h2v-4h1"},
	} {
		if got := string(stepPath(nil, c.vals, 10, 10, c.top)); got != c.want {
			t.Errorf("stepPath(%v) = %q, want %q", c.vals, got, c.want)
		}
	}
}

func TestHostTrendMarkup(t *testing.T) {
	f := &fakeSource{hosts: []deliver.HostGauge{{Host: "a.example", Queued: 4, Delivered: 3}}}
	h := NewHistory(f.source())
	h.Sample(t0)
	f.hosts[0].Queued, f.hosts[0].Delivered = 8, 10
	h.Sample(t0.Add(HostStep))
	got, _ := h.trendHTML("a.example", nil)
	for _, want := range []string{`data-queued="8"`, `data-queued-max="8"`, `data-delivered="10"`,
		`aria-label="last 15 min: queued now 8, at most 8; 10 delivered"`, `<path class="q" d="M88 9h1v-8h1"/>`} {
		if !strings.Contains(string(got), want) {
			t.Errorf("sparkline %s\nlacks %s", got, want)
		}
	}
	if got, _ := h.trendHTML("nobody.example", nil); got != "" {
		t.Errorf("a host without a history: %q", got)
	}
	var none *History
	if got, _ := none.trendHTML("a.example", nil); got != "" || newChartsView(none) != nil {
		t.Error("a nil history draws something")
	}
}

// fullHistory is a history of 15 minutes for every host in hosts, their
// queues and deliveries changing at every sample (the longest paths).
func fullHistory(hosts []deliver.HostStatus) *History {
	f := &fakeSource{}
	for _, st := range hosts {
		f.hosts = append(f.hosts, deliver.HostGauge{Host: st.Host, Queued: st.Queued, Delivered: st.Delivered})
	}
	h := NewHistory(f.source())
	for i := range spoolSlots + 1 {
		f.accepted += int64(i % 13)
		f.delivered += int64(i % 11)
		f.queued = int64(i % 17)
		if i%10 == 0 {
			for j := range f.hosts {
				f.hosts[j].Queued = int64((i + j) % 19)
				f.hosts[j].Delivered += int64((i + j) % 5)
			}
		}
		h.Sample(t0.Add(time.Duration(i) * time.Second))
	}
	return h
}

func TestPageDrawsTheHistory(t *testing.T) {
	f := newFixture(t)
	_, _, ids, body := f.render(t, "")
	if _, ok := ids["history"]; ok || strings.Contains(body, `data-col="trend"`) {
		t.Error("charts without a history")
	}
	f.page.api.History = fullHistory(f.hosts.Hosts())
	rows, _, ids, body := f.render(t, "")
	if _, ok := ids["history"]; !ok || ids["chart-accepted-now"] != "3" || ids["chart-delivered-now"] != "9" || ids["chart-queued-now"] != "16" {
		t.Errorf("spool charts: %v", ids)
	}
	var acc, del int
	for i := 1; i <= spoolSlots; i++ {
		acc, del = acc+i%13, del+i%11
	}
	for _, want := range []string{fmt.Sprintf(`id="chart-rate" data-accepted="%d" data-delivered="%d" data-top="12"`, acc, del),
		"Per second</strong>, last 15 min:",
		`<path class="q" d="M0 `, `<svg class="spark" role="img"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if n := strings.Count(body, `<td data-col="trend"><svg class="spark"`); n != len(rows) || n != 2 {
		t.Errorf("%d sparklines in %d rows, want one a row", n, len(rows))
	}
}

func TestHistoryHostRingGrowsWithItsSamples(t *testing.T) {
	f := &fakeSource{hosts: []deliver.HostGauge{{Host: "a.example", Queued: 1}}}
	h := NewHistory(f.source())
	for i := range 3 {
		f.hosts[0].Queued, f.hosts[0].Delivered = int64(i+1), int64(10*(i+1))
		h.Sample(t0.Add(time.Duration(i) * HostStep))
	}
	if c := cap(h.hosts["a.example"].samples.v); c != 4 {
		t.Errorf("3 samples held in a ring of %d, want 4", c)
	}
	a, _ := h.Host("a.example")
	if want := []uint16{1, 2, 3}; !slices.Equal(a.Queued, want) {
		t.Errorf("queued %v, want %v", a.Queued, want)
	}
	if want := []uint16{10, 10, 10}; !slices.Equal(a.Delivered, want) {
		t.Errorf("delivered %v, want %v", a.Delivered, want)
	}
}
