package e2e

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/redistest"
)

// Fleet mode. Three real hookpace processes share one real
// redis-server; a slow partner counts what arrives and how many at once.

// slowPartner answers after a delay and records when each request was in
// progress.
type slowPartner struct {
	*Receiver
	delay time.Duration

	mu        sync.Mutex
	now, most int
	spans     []span
	wire      map[int]time.Time // request n: when its bytes arrived
}

type span struct{ start, end time.Time }

func newSlowPartner(t *testing.T, delay time.Duration) *slowPartner {
	p := &slowPartner{Receiver: newWireReceiver(t), delay: delay, wire: map[int]time.Time{}}
	p.Handle = func(w http.ResponseWriter, r *http.Request, n int) {
		start := time.Now()
		p.mu.Lock()
		if at := wireTime(r); !at.IsZero() {
			p.wire[n] = at
		}
		p.now++
		p.most = max(p.most, p.now)
		p.mu.Unlock()
		time.Sleep(p.delay) // the partner's own work, not a wait in the test
		p.mu.Lock()
		p.now--
		p.spans = append(p.spans, span{start, time.Now()})
		p.mu.Unlock()
		w.WriteHeader(200)
	}
	return p
}

// Arrivals are the partner's arrivals, each at the time its bytes
// reached the partner's host (see wireListener); handlerArrivals at the
// time its handler ran.
func (p *slowPartner) Arrivals() []Arrival {
	as := p.Receiver.Arrivals()
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range as {
		if at, ok := p.wire[i+1]; ok {
			as[i].At = at
		}
	}
	return as
}

func (p *slowPartner) handlerArrivals() []Arrival { return p.Receiver.Arrivals() }

func (p *slowPartner) mostAtOnce() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.most
}

// resetMost starts counting the most at once afresh (between phases).
func (p *slowPartner) resetMost() {
	p.mu.Lock()
	p.most = p.now
	p.mu.Unlock()
}

// fullAgain is when, after k, the partner first had want requests in
// progress that all started after k.
func (p *slowPartner) fullAgain(k time.Time, want int) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	type ev struct {
		at time.Time
		d  int
	}
	var evs []ev
	for _, s := range p.spans {
		if s.start.After(k) {
			evs = append(evs, ev{s.start, 1}, ev{s.end, -1})
		}
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].at.Equal(evs[j].at) {
			return evs[i].d < evs[j].d
		}
		return evs[i].at.Before(evs[j].at)
	})
	n := 0
	for _, e := range evs {
		if n += e.d; n >= want {
			return e.at, true
		}
	}
	return time.Time{}, false
}

func startFleet(t *testing.T, srv *redistest.Server, n int, hostCfg string) []*Hookpace {
	t.Helper()
	var hps []*Hookpace
	for i := range n {
		hps = append(hps, Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
fleet: {redis: "%s", replica: r%d, lease_period: 3s, timeout: 900ms}
hosts:
  %s
`, srv.URL(), i+1, hostCfg)))
	}
	for _, hp := range hps { // every replica knows the others before the test sends
		Poll(t, 10*time.Second, "3 live replicas", func() bool { return fleetOf(t, hp).Live == n })
	}
	return hps
}

type fleetView struct {
	Live     int    `json:"live_replicas"`
	Degraded bool   `json:"degraded"`
	State    string `json:"state"`
}

type hostView struct {
	Host          string `json:"host"`
	Queued        int    `json:"queued"`
	InFlight      int    `json:"in_flight"`
	Paused        bool   `json:"paused"`
	Fleet         string `json:"fleet"`
	FleetInFlight *int   `json:"fleet_in_flight"`
}

func fleetOf(t *testing.T, hp *Hookpace) fleetView {
	var out struct{ Fleet fleetView }
	hp.AdminJSON("/v1/hosts", &out)
	return out.Fleet
}

func hostOf(t *testing.T, hp *Hookpace, host string) hostView {
	var out struct{ Hosts []hostView }
	hp.AdminJSON("/v1/hosts", &out)
	for _, h := range out.Hosts {
		if h.Host == host {
			return h
		}
	}
	return hostView{}
}

// postSpread sends n webhooks PREFIX/i spread over the replicas, all at
// once, and fails unless each gets its 202.
func postSpread(t *testing.T, hps []*Hookpace, rc *Receiver, prefix string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for k, hp := range hps {
		wg.Go(func() {
			var mine []int
			for i := k; i < n; i += len(hps) {
				mine = append(mine, i)
			}
			PostAll(t, hp, len(mine), 16, func(j int) string { return fmt.Sprintf("%s/%s/%d", rc.URL, prefix, mine[j]) })
		})
	}
	wg.Wait()
}

// fleetCheckOnce waits for n webhooks PREFIX/i delivered and checks each
// was delivered (answered with a success) once.
func fleetCheckOnce(t *testing.T, rc *Receiver, prefix string, n int, limit time.Duration) {
	t.Helper()
	mine := func(a Arrival) bool { return strings.HasPrefix(a.Path, "/"+prefix+"/") }
	delivered := func(a Arrival) bool { return mine(a) && a.Status >= 200 && a.Status < 300 }
	rc.WaitFor(t, limit, fmt.Sprintf("%d %s webhooks", n, prefix), func(as []Arrival) bool {
		return rc.Count(delivered) >= n
	})
	// Delivered once: answered with a success once. An attempt the
	// partner refused (a 503 of an overloaded one) is sent again.
	seen := map[string]int{}
	for _, a := range rc.Arrivals() {
		if delivered(a) {
			seen[a.Path]++
		}
	}
	for i := range n {
		if c := seen[fmt.Sprintf("/%s/%d", prefix, i)]; c != 1 {
			t.Fatalf("/%s/%d arrived %d times", prefix, i, c)
		}
	}
}

func busiestSecond(as []Arrival) int {
	ts := make([]time.Time, len(as))
	for i, a := range as {
		ts[i] = a.At
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	return maxWindow(ts, time.Second)
}

// TestFleetSharedLimits is the acceptance: three replicas, 300
// webhooks to a slow partner at 20/s burst 10 concurrency 4: at most 30
// in any second and 4 at once, each delivered once; the same with Redis
// killed (each replica on its share), and shared again after a restart.
func TestFleetSharedLimits(t *testing.T) {
	// Alone, not in parallel: see "Fleet bounds" in harness_test.go.
	busyNode(t)
	srv := redistest.Start(t)
	rc := newSlowPartner(t, 150*time.Millisecond)
	hps := startFleet(t, srv, 3, fmt.Sprintf(`"%s": {rate: 20/s, burst: 10, concurrency: 4}`, rc.Host()))

	postSpread(t, hps, rc.Receiver, "shared", 300)
	fleetCheckOnce(t, rc.Receiver, "shared", 300, 60*time.Second)
	shared := rc.Arrivals()
	t.Logf("shared: busiest second %d (%d by the handler's clock), most at once %d", busiestSecond(shared), busiestSecond(rc.handlerArrivals()), rc.mostAtOnce())
	if n := busiestSecond(shared); n > 30 {
		t.Fatalf("%d arrivals in one second, bound 30 (%s)", n, degradedLogs(hps))
	}
	if m := rc.mostAtOnce(); m > 4 {
		t.Fatalf("%d at once, cap 4 (%s)", m, degradedLogs(hps))
	}
	if h := hostOf(t, hps[0], rc.Host()); h.Fleet != "shared" || h.FleetInFlight == nil {
		t.Fatalf("/v1/hosts: %+v", h)
	}

	srv.Kill()
	rc.resetMost()
	postSpread(t, hps, rc.Receiver, "down", 300)
	fleetCheckOnce(t, rc.Receiver, "down", 300, 90*time.Second)
	for _, hp := range hps {
		if f := fleetOf(t, hp); !f.Degraded || f.State != "degraded: local share 1/3" {
			t.Fatalf("fleet with redis down: %+v", f)
		}
	}
	out, err := hps[1].CLI("status")
	if err != nil || !strings.Contains(out, "fleet degraded: local share 1/3") {
		t.Fatalf("hookpace status with redis down (%v):\n%s", err, out)
	}
	if !strings.Contains(hps[0].Log(), "fleet degraded") || strings.Count(hps[0].Log(), "fleet degraded") != 1 {
		t.Fatalf("want the fallback logged once:\n%s", hps[0].Log())
	}
	if !strings.Contains(hps[0].Metrics(), "hookpace_fleet_fallbacks_total 1") {
		t.Fatal("hookpace_fleet_fallbacks_total is not 1")
	}
	all := rc.Arrivals()
	t.Logf("redis down: busiest second %d, most at once %d", busiestSecond(all[len(shared):]), rc.mostAtOnce())
	if n := busiestSecond(all); n > 30 {
		t.Fatalf("%d arrivals in one second with redis down, bound 30", n)
	}
	if m := rc.mostAtOnce(); m > 4 {
		t.Fatalf("%d at once with redis down, cap 4", m)
	}

	srv.Restart()
	rc.resetMost()
	for _, hp := range hps {
		Poll(t, 10*time.Second, "shared again", func() bool { return !fleetOf(t, hp).Degraded })
	}
	postSpread(t, hps, rc.Receiver, "again", 60)
	fleetCheckOnce(t, rc.Receiver, "again", 60, 30*time.Second)
	if n := busiestSecond(rc.Arrivals()); n > 30 {
		t.Fatalf("%d arrivals in one second after redis came back, bound 30", n)
	}
	if m := rc.mostAtOnce(); m > 4 {
		t.Fatalf("%d at once after redis came back, cap 4", m)
	}
	if h := hostOf(t, hps[2], rc.Host()); h.Fleet != "shared" {
		t.Fatalf("/v1/hosts after redis came back: %+v", h)
	}
}

// degradedLogs says which replicas fell back to their share, and why: a
// replica whose Redis round trip timed out on a loaded machine paces on
// its share while the others share Redis.
func degradedLogs(hps []*Hookpace) string {
	var out []string
	for i, hp := range hps {
		for _, l := range strings.Split(hp.Log(), "\n") {
			if strings.Contains(l, "fleet degraded") {
				out = append(out, fmt.Sprintf("r%d: %s", i+1, l))
			}
		}
	}
	if len(out) == 0 {
		return "no replica fell back"
	}
	return strings.Join(out, "; ")
}

// TestFleet429 checks the shared holding pattern: a 429 with Retry-After: 5
// at one replica, and none of the three sends to the host for 5 s.
// Concurrency 1 makes "sent after the 429" unambiguous: the lease of the
// throttled attempt is given back in the same script that starts the hold.
func TestFleet429(t *testing.T) {
	// Alone, not in parallel: see "Fleet bounds" in harness_test.go.
	srv := redistest.Start(t)
	rc := NewReceiver(t)
	var mu sync.Mutex
	var at429 time.Time
	rc.Handle = func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 15 {
			w.Header().Set("Retry-After", "5")
			w.WriteHeader(http.StatusTooManyRequests)
			mu.Lock()
			at429 = time.Now()
			mu.Unlock()
			return
		}
		w.WriteHeader(200)
	}
	hps := startFleet(t, srv, 3, fmt.Sprintf(`"%s": {rate: 20/s, burst: 5, concurrency: 1}`, rc.Host()))
	postSpread(t, hps, rc, "h", 60)
	checkOnce429(t, rc, 60)
	mu.Lock()
	held := at429
	mu.Unlock()
	var next time.Time
	for _, a := range rc.Arrivals() {
		if a.At.After(held) && (next.IsZero() || a.At.Before(next)) {
			next = a.At
		}
	}
	t.Logf("429 at %s; next arrival %v later", held.Format("15:04:05.000"), next.Sub(held))
	if next.Sub(held) < 5*time.Second {
		t.Fatalf("an arrival %v after the 429 with Retry-After: 5", next.Sub(held))
	}
}

func checkOnce429(t *testing.T, rc *Receiver, n int) {
	t.Helper()
	rc.WaitFor(t, 60*time.Second, "all delivered", func(as []Arrival) bool { return Delivered2xx(as) >= n })
	seen := map[string]int{}
	for _, a := range rc.Arrivals() {
		if a.Status == 200 {
			seen[a.Path]++
		}
	}
	for i := range n {
		if c := seen[fmt.Sprintf("/h/%d", i)]; c != 1 {
			t.Fatalf("/h/%d delivered %d times", i, c)
		}
	}
}

// TestFleetKill9 kills a replica that holds leases: the other two get the
// whole concurrency back once its leases expire, within one lease period
// (plus the time to notice: they look again at least every 250 ms).
func TestFleetKill9(t *testing.T) {
	// Alone, not in parallel: see "Fleet bounds" in harness_test.go.
	srv := redistest.Start(t)
	rc := newSlowPartner(t, 500*time.Millisecond)
	hps := startFleet(t, srv, 3, fmt.Sprintf(`"%s": {rate: 100/s, burst: 10, concurrency: 4}`, rc.Host()))
	// r3 alone has work, so it takes every lease; the others get theirs
	// only after the kill, so they have a backlog whatever the machine's
	// speed while the dead replica's leases run out.
	postSpread(t, hps[2:], rc.Receiver, "k3", 30)
	Poll(t, 10*time.Second, "r3 holding every lease", func() bool { return hostOf(t, hps[2], rc.Host()).InFlight == 4 })
	killed := time.Now()
	hps[2].Kill()
	postSpread(t, hps[:2], rc.Receiver, "k", 60)
	rc.WaitFor(t, 60*time.Second, "the others' webhooks", func(as []Arrival) bool {
		_, ok := rc.fullAgain(killed, 4)
		return ok || rc.Count(func(a Arrival) bool { return strings.HasPrefix(a.Path, "/k/") }) >= 60
	})
	full, ok := rc.fullAgain(killed, 4)
	if !ok {
		t.Fatal("the two left never had 4 in flight together after the kill")
	}
	t.Logf("kill -9 of r3: 4 at once again %v later (lease period 3s)", full.Sub(killed))
	// A dead replica's leases run out after one lease period; the bound
	// is two, as the others may be slow to take them up on a busy machine.
	if full.Sub(killed) > 2*3*time.Second {
		t.Fatalf("full concurrency back %v after the kill, lease period 3s", full.Sub(killed))
	}
	if m := rc.mostAtOnce(); m > 4 {
		t.Fatalf("%d at once, cap 4", m)
	}
}

// TestFleetPause: pause on one replica stops all three; resume on another
// restarts them.
func TestFleetPause(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rc := NewReceiver(t)
	hps := startFleet(t, srv, 3, fmt.Sprintf(`"%s": {rate: 50/s, burst: 5, concurrency: 2}`, rc.Host()))
	if out, err := hps[0].CLI("pause", rc.Host()); err != nil {
		t.Fatalf("hookpace pause: %v\n%s", err, out)
	}
	postSpread(t, hps, rc, "p", 30)
	for _, hp := range hps {
		Poll(t, 10*time.Second, "paused with work queued", func() bool {
			h := hostOf(t, hp, rc.Host())
			return h.Paused && h.Queued > 0
		})
	}
	if n := len(rc.Arrivals()); n != 0 {
		t.Fatalf("%d arrivals while paused", n)
	}
	if out, err := hps[1].CLI("resume", rc.Host()); err != nil {
		t.Fatalf("hookpace resume: %v\n%s", err, out)
	}
	fleetCheckOnce(t, rc, "p", 30, 30*time.Second)
	for _, hp := range hps {
		if h := hostOf(t, hp, rc.Host()); h.Paused {
			t.Fatalf("still paused after resume: %+v", h)
		}
	}
}
