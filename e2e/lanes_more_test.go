package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Lanes from outside, continued: a delay and a key's cap across a
// kill -9, ordering keys across a kill -9 in the middle of delivery,
// weights, and an ordered key's active webhook purged.

// A delayed webhook still waits for its not-before after a kill -9 and a
// restart.
func TestDelayAcrossKillE2E(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 50/s}
`, rc.Host()))
	sent := time.Now()
	if status, _, body := PostRaw(t, hp.Client(), rc.URL+"/delayed", WebhookBody(0), http.Header{"Hookpace-Delay": {"4s"}}); status != http.StatusAccepted {
		t.Fatalf("delayed: %d %s", status, body)
	}
	hp.Kill()
	hp.Restart()
	if status, _, body := PostRaw(t, hp.Client(), rc.URL+"/plain", WebhookBody(1), nil); status != http.StatusAccepted {
		t.Fatalf("plain: %d %s", status, body)
	}
	rc.WaitFor(t, 30*time.Second, "both delivered", func(as []Arrival) bool { return Delivered2xx(as) == 2 })
	as := rc.Arrivals()
	if as[0].Path != "/plain" || as[1].At.Before(sent.Add(4*time.Second)) {
		t.Errorf("arrivals %v, the delayed one %v after it was sent; want it last, no sooner than 4s", paths(as), as[1].At.Sub(sent))
	}
}

// max_queued_per_key counts what the spool holds after a kill -9, and a
// key gets room again as its webhooks are delivered.
func TestMaxQueuedPerKeyAcrossKillE2E(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 100/s, fairness: {key: header, max_queued_per_key: 3}}
`, rc.Host()))
	pauseHost(t, hp, rc.Host())
	post := func(key string) int {
		status, _, _ := PostRaw(t, hp.Client(), rc.URL+"/"+key, WebhookBody(1), http.Header{"Hookpace-Fairness-Key": {key}})
		return status
	}
	for i := range 3 {
		if s := post("A"); s != http.StatusAccepted {
			t.Fatalf("A's %d: %d", i, s)
		}
	}
	hp.Kill()
	hp.Restart()
	if s := post("A"); s != http.StatusTooManyRequests {
		t.Errorf("A's 4th after the restart: %d, want 429 (3 queued)", s)
	}
	resumeHost(t, hp, rc.Host())
	rc.WaitFor(t, 30*time.Second, "A's 3 delivered", func(as []Arrival) bool { return Delivered2xx(as) == 3 })
	Poll(t, 10*time.Second, "A accepted again", func() bool { return post("A") == http.StatusAccepted })
}

// Ordering keys across a kill -9 in the middle of their delivery, to a
// slow partner that answers 503 to every 7th request: each key's 2xx
// stay in order (the one in flight when hookpace died may come twice),
// and none goes before the one ahead of it was answered 2xx.
func TestOrderingKillMidDeliveryE2E(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	p := newOrderPartner()
	p.failEvery = 7
	rc.Handle = func(w http.ResponseWriter, r *http.Request, n int) {
		time.Sleep(20 * time.Millisecond) // a slow partner: the kill lands mid-flight
		p.handle(w, r, n)
	}
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 1000/s, burst: 10, concurrency: 8, backoff_initial: 100ms, backoff_max: 200ms, max_attempts: 50}
`, rc.Host()))
	pauseHost(t, hp, rc.Host())
	const keys, per = 5, 20
	for seq := range per {
		postKeyed(t, hp, rc, seq*keys, (seq+1)*keys, 8, func(i int) http.Header {
			return orderHeader(fmt.Sprint("k", i%keys), i/keys+1)
		})
	}
	resumeHost(t, hp, rc.Host())
	rc.WaitFor(t, 30*time.Second, "a third delivered", func(as []Arrival) bool { return Delivered2xx(as) >= keys*per/3 })
	hp.Kill()
	hp.Restart()
	rc.WaitFor(t, 60*time.Second, "every key's last delivered", func([]Arrival) bool {
		for k := range keys {
			if _, ok := p.seqs(fmt.Sprint("k", k)); len(ok) == 0 || ok[len(ok)-1] != per {
				return false
			}
		}
		return true
	})
	for k := range keys {
		_, ok := p.seqs(fmt.Sprint("k", k))
		next := 1
		for _, s := range ok {
			switch s {
			case next:
				next++
			case next - 1: // the one in flight at the kill, again
			default:
				t.Errorf("k%d's 2xx %v: not in order", k, ok)
			}
		}
	}
	for _, e := range p.earlyOnes() {
		t.Error(e)
	}
}

// A key with weight 3 gets three turns to another's one.
func TestFairnessWeightsE2E(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 200/s, burst: 1, concurrency: 1, fairness: {key: header, weights: {big: 3}}}
`, rc.Host()))
	pauseHost(t, hp, rc.Host())
	postKeyed(t, hp, rc, 0, 60, 8, func(int) http.Header { return http.Header{"Hookpace-Fairness-Key": {"big"}} })
	postKeyed(t, hp, rc, 60, 120, 8, func(int) http.Header { return http.Header{"Hookpace-Fairness-Key": {"small"}} })
	resumeHost(t, hp, rc.Host())
	rc.WaitFor(t, 30*time.Second, "all 120 delivered", func(as []Arrival) bool { return Delivered2xx(as) == 120 })
	big := 0
	for _, a := range rc.Arrivals()[:40] {
		var i int
		fmt.Sscanf(a.Path, "/hook/%d", &i)
		if i < 60 {
			big++
		}
	}
	if big < 28 || big > 32 {
		t.Errorf("%d of the first 40 arrivals are the weight-3 key's, want about 30", big)
	}
}

// Purging an ordered key's first webhook, which waits for its retry,
// moves the key on.
func TestOrderingPurgedActiveE2E(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	p := newOrderPartner()
	rc.Handle = func(w http.ResponseWriter, r *http.Request, n int) {
		if r.Header.Get("X-Seq") == "1" {
			w.Header().Set("Retry-After", "300")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		p.handle(w, r, n)
	}
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 100/s, max_retry_after: 10m}
`, rc.Host()))
	var ids []string
	c := hp.Client()
	for seq := 1; seq <= 3; seq++ {
		status, id := hp.Post(c, rc.URL+"/k", WebhookBody(seq), orderHeader("k", seq))
		if status != http.StatusAccepted {
			t.Fatalf("k/%d: %d", seq, status)
		}
		ids = append(ids, id)
	}
	rc.WaitFor(t, 10*time.Second, "k/1's first attempt", func(as []Arrival) bool { return len(as) == 1 && as[0].Status != 0 })
	if out, err := hp.CLI("queue", "purge", "--host", rc.Host(), ids[0]); err != nil {
		t.Fatalf("purge: %v\n%s", err, out)
	}
	rc.WaitFor(t, 30*time.Second, "k/2 and k/3 delivered", func(as []Arrival) bool { return Delivered2xx(as) == 2 })
	if _, ok := p.seqs("k"); fmt.Sprint(ok) != "[2 3]" {
		t.Errorf("k's 2xx %v, want [2 3]", ok)
	}
	if strings.Count(fmt.Sprint(paths(rc.Arrivals())), "/k") != 3 {
		t.Errorf("arrivals %v, want k/1 once (its 503), then k/2 and k/3", paths(rc.Arrivals()))
	}
}

// fairClient is a client through hp as proxy user user (password s3cret).
func fairClient(hp *Hookpace, user string) *http.Client {
	u, _ := url.Parse("http://" + user + ":s3cret@" + hp.Proxy)
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u), MaxIdleConnsPerHost: 16}, Timeout: 30 * time.Second}
}

// The other ways to name the fairness key: the URL's path (path_depth 2)
// and the proxy user. Bulk's 300 do not bury the other tenant's one.
func TestFairnessPathAndProxyUserE2E(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"path", "proxy_user"} {
		t.Run(mode, func(t *testing.T) {
			rc := NewReceiver(t)
			hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
auth: {users: [{username: bulk, password: s3cret}, {username: other, password: s3cret}]}
hosts:
  "%s": {rate: 20/s, burst: 2, concurrency: 2, fairness: {key: %s, path_depth: 2}}
`, rc.Host(), mode))
			bulk, other := fairClient(hp, "bulk"), fairClient(hp, "other")
			target := func(tenant string, i int) string { return fmt.Sprintf("%s/webhooks/%s/%d", rc.URL, tenant, i) }
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < 300; i += 8 {
						if status, _, body := PostRaw(t, bulk, target("cust-1", i), WebhookBody(i), nil); status != http.StatusAccepted {
							t.Errorf("bulk %d: %d %s", i, status, body)
							return
						}
					}
				}()
			}
			wg.Wait()
			status, _, body := PostRaw(t, other, target("cust-2", 0), WebhookBody(0), nil)
			before := rc.Count(nil)
			if status != http.StatusAccepted {
				t.Fatalf("other: %d %s", status, body)
			}
			one := func(a Arrival) bool { return strings.HasPrefix(a.Path, "/webhooks/cust-2/") }
			rc.WaitFor(t, 30*time.Second, "the other tenant's webhook", func(as []Arrival) bool { return slices.ContainsFunc(as, one) })
			if between := slices.IndexFunc(rc.Arrivals(), one) - before; between > 4 {
				t.Errorf("%d of bulk's arrived between the other's 202 and its arrival, want at most 4", between)
			}
		})
	}
}

// The "Visible": /v1/hosts/{host} and the status page show the
// busiest fairness keys (queued, oldest age), the ordering keys that are
// blocked and on what, and counts per priority. Checked loosely, by the
// names on the page, by the fields in the API.
func TestLanesVisibleE2E(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	rc.Handle = func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("Retry-After", "600") // the ordered key's first is blocked on this
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 100/s, max_retry_after: 15m, fairness: {key: header}}
`, rc.Host()))
	c := hp.Client()
	post := func(h http.Header) {
		if status, _, body := PostRaw(t, c, rc.URL+"/x", WebhookBody(0), h); status != http.StatusAccepted {
			t.Fatalf("%v: %d %s", h, status, body)
		}
	}
	post(http.Header{"Hookpace-Fairness-Key": {"tenant-ord"}, "Hookpace-Ordering-Key": {"order-77"}})
	rc.WaitFor(t, 10*time.Second, "order-77's first attempt", func(as []Arrival) bool { return len(as) == 1 && as[0].Status != 0 })
	pauseHost(t, hp, rc.Host())
	post(http.Header{"Hookpace-Fairness-Key": {"tenant-ord"}, "Hookpace-Ordering-Key": {"order-77"}})
	for range 20 {
		post(http.Header{"Hookpace-Fairness-Key": {"bulk-tenant"}, "Hookpace-Priority": {"low"}})
	}
	post(http.Header{"Hookpace-Fairness-Key": {"small-tenant"}, "Hookpace-Priority": {"high"}})
	var raw map[string]any
	hp.AdminJSON("/v1/hosts/"+rc.Host(), &raw)
	js := fmt.Sprint(raw)
	resp, err := http.Get("http://" + hp.Admin + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var hv struct {
		Lanes struct {
			Priorities map[string]int `json:"queued_by_priority"`
			Busiest    []struct {
				Key    string
				Queued int
				Oldest *time.Time
			} `json:"busiest_keys"`
			Blocked []struct {
				Key        string `json:"ordering_key"`
				Fairness   string `json:"fairness_key"`
				Waiting    int
				State      string
				LastStatus int `json:"last_status"`
			} `json:"blocked_ordering_keys"`
		}
	}
	// The receiver has answered the 503; hookpace takes it a moment later,
	// until when order-77's first is still its next.
	Poll(t, 10*time.Second, "order-77's 503 taken", func() bool {
		hp.AdminJSON("/v1/hosts/"+rc.Host(), &hv)
		return len(hv.Lanes.Blocked) != 1 || hv.Lanes.Blocked[0].State != "next"
	})
	l := hv.Lanes
	if len(l.Busiest) == 0 || l.Busiest[0].Key != "bulk-tenant" || l.Busiest[0].Queued != 20 || l.Busiest[0].Oldest == nil {
		t.Errorf("busiest_keys %+v, want bulk-tenant first with 20 queued and its oldest", l.Busiest)
	}
	if l.Priorities["low"] != 20 || l.Priorities["high"] != 1 || l.Priorities["normal"] != 2 {
		t.Errorf("queued_by_priority %v, want low 20, high 1, normal 2 (the ordered key's)", l.Priorities)
	}
	if len(l.Blocked) != 1 || l.Blocked[0].Key != "order-77" || l.Blocked[0].Fairness != "tenant-ord" ||
		l.Blocked[0].Waiting != 1 || l.Blocked[0].State != "retrying" || l.Blocked[0].LastStatus != 503 {
		t.Errorf("blocked_ordering_keys %+v, want order-77 of tenant-ord, 1 waiting behind one retrying after a 503", l.Blocked)
	}
	for _, want := range []string{"bulk-tenant", "order-77"} {
		if !strings.Contains(js, want) {
			t.Errorf("/v1/hosts/{host} does not name %s: %s", want, js)
		}
		if !strings.Contains(string(page), want) {
			t.Errorf("the status page does not name %s", want)
		}
	}
}

// The first acceptance, counted in arrivals rather than seconds
// (the bench times it): a partner at 50/s burst 5, tenant A's 3,000, then
// tenant B's 10 one after another. B's take every other turn: all ten
// arrive, in order, within 2 per B (and the stage and slots in flight)
// of the first one's 202.
func TestFairnessAcceptanceE2E(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 50/s, burst: 5, fairness: {key: header}}
`, rc.Host()))
	postKeyed(t, hp, rc, 0, 3000, 16, func(int) http.Header { return http.Header{"Hookpace-Fairness-Key": {"A"}} })
	c := hp.Client()
	before := -1
	for i := range 10 {
		status, _, body := PostRaw(t, c, fmt.Sprintf("%s/b/%d", rc.URL, i), WebhookBody(i), http.Header{"Hookpace-Fairness-Key": {"B"}})
		if status != http.StatusAccepted {
			t.Fatalf("B's %d: %d %s", i, status, body)
		}
		if before < 0 {
			before = rc.Count(nil)
		}
	}
	// Counted from B's last 202: how slowly this client posts B's ten (a
	// busy machine) is no part of how B is served once queued.
	queued := rc.Count(nil)
	isB := func(a Arrival) bool { return strings.HasPrefix(a.Path, "/b/") }
	rc.WaitFor(t, 60*time.Second, "B's ten", func(as []Arrival) bool { return Delivered2xx(filter(as, isB)) == 10 })
	as := rc.Arrivals()
	var bs []string
	last := 0
	for i, a := range as {
		if isB(a) {
			bs = append(bs, a.Path)
			last = i
		}
	}
	// B's are picked in order, but two of them may be in flight at once
	// (A's and B's turns alternate over four slots), and two requests in
	// flight together reach the receiver in either order: each of B's ten
	// arrives once, at most one place from its own.
	var want []string
	for i := range 10 {
		want = append(want, fmt.Sprintf("/b/%d", i))
	}
	sorted := slices.Clone(bs)
	slices.Sort(sorted) // "/b/0" to "/b/9" sort as their numbers
	if fmt.Sprint(sorted) != fmt.Sprint(want) {
		t.Errorf("B's arrived as %v, want each of %v once", bs, want)
	} else {
		for pos, path := range bs {
			if at := slices.Index(want, path); at < pos-1 || at > pos+1 {
				t.Errorf("B's arrived as %v: %s at place %d, more than one from its own", bs, path, pos)
				break
			}
		}
	}
	if between := last - queued; between > 2*10+4 {
		t.Errorf("B's last arrived %d arrivals after B's last 202, want at most %d", between, 2*10+4)
	}
	if a := before; a >= 3000/2 {
		t.Fatalf("%d of A's had arrived before B's first: no backlog to test against", a)
	}
}

func filter(as []Arrival, keep func(Arrival) bool) []Arrival {
	var out []Arrival
	for _, a := range as {
		if keep(a) {
			out = append(out, a)
		}
	}
	return out
}
