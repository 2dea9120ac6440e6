package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Fair, ordered,
// prioritised and delayed delivery within one partner host.

// postKeyed POSTs webhooks from..to-1 to rc through hp, parallel at a
// time, webhook i with the headers hdr(i) and the path /hook/i, and fails
// the test unless each gets 202.
func postKeyed(t *testing.T, hp *Hookpace, rc *Receiver, from, to, parallel int, hdr func(i int) http.Header) {
	t.Helper()
	c := hp.Client()
	defer c.CloseIdleConnections()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		fails []string
	)
	sem := make(chan struct{}, parallel)
	for i := from; i < to; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			status, _, body := PostRaw(t, c, fmt.Sprintf("%s/hook/%d", rc.URL, i), WebhookBody(i), hdr(i))
			if status != http.StatusAccepted {
				mu.Lock()
				fails = append(fails, fmt.Sprintf("webhook %d: %d %s", i, status, body))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(fails) > 0 {
		t.Fatalf("%d of %d webhooks not acknowledged, first: %s", len(fails), to-from, fails[0])
	}
}

// pauseHost and resumeHost use the CLI, as an operator would.
func pauseHost(t *testing.T, hp *Hookpace, host string) {
	t.Helper()
	if out, err := hp.CLI("pause", host); err != nil {
		t.Fatalf("pause: %v\n%s", err, out)
	}
}

func resumeHost(t *testing.T, hp *Hookpace, host string) {
	t.Helper()
	if out, err := hp.CLI("resume", host); err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
}

// onceEach fails the test unless the 2xx arrivals are exactly the paths
// /hook/0 .. /hook/n-1, each once.
func onceEach(t *testing.T, as []Arrival, n int) {
	t.Helper()
	seen := map[string]int{}
	for _, a := range as {
		if a.Status >= 200 && a.Status < 300 {
			seen[a.Path]++
		}
	}
	for i := range n {
		if p := fmt.Sprintf("/hook/%d", i); seen[p] != 1 {
			t.Errorf("%s delivered %d times, want once", p, seen[p])
		}
	}
	if len(seen) != n {
		t.Errorf("%d distinct webhooks delivered, want %d", len(seen), n)
	}
}

// A bulk tenant's 1,000 webhooks queued behind a 20/s partner do not
// bury another tenant's one: it arrives within a few arrivals of its 202,
// not after the backlog.
func TestFairnessBulkTenantE2E(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 20/s, burst: 2, concurrency: 2, fairness: {key: header}}
`, rc.Host()))
	const bulk = 1000
	postKeyed(t, hp, rc, 0, bulk, 16, func(int) http.Header { return http.Header{"Hookpace-Fairness-Key": {"bulk"}} })

	c := hp.Client()
	status, _, body := PostRaw(t, c, rc.URL+"/tenant-b", WebhookBody(-1), http.Header{"Hookpace-Fairness-Key": {"tenant-b"}})
	before := rc.Count(nil) // arrivals up to tenant-b's 202
	if status != http.StatusAccepted {
		t.Fatalf("tenant-b: %d %s", status, body)
	}
	rc.WaitFor(t, 30*time.Second, "tenant-b's webhook", func(as []Arrival) bool {
		for _, a := range as {
			if a.Path == "/tenant-b" {
				return true
			}
		}
		return false
	})
	as := rc.Arrivals()
	at := 0
	for i, a := range as {
		if a.Path == "/tenant-b" {
			at = i
		}
	}
	if between := at - before; between > 4 {
		t.Errorf("%d of bulk's webhooks arrived between tenant-b's 202 and its arrival, want at most 4 (bulk had %d delivered, %d queued)",
			between, before, bulk-before)
	}
	if before >= bulk/2 {
		t.Fatalf("%d of %d bulk webhooks had arrived before tenant-b's: no backlog to test against", before, bulk)
	}
	t.Logf("tenant-b arrived after %d bulk arrivals (%d before its 202), with %d bulk queued", at, before, bulk-at)
}

// orderPartner answers 2xx, except a 503 with Retry-After: 2 to the first
// attempt of each webhook fail names ("key/seq") (a 500's backoff has full
// jitter, down to 10 ms, which would make "meanwhile" below a race), and a
// 503 (no Retry-After) to every failEvery-th request; it records, per ordering key (X-Key),
// the sequence numbers (X-Seq) in the order they arrived and any that
// arrived before the one ahead of it was answered 2xx.
type orderPartner struct {
	mu        sync.Mutex
	fail      map[string]bool
	failEvery int // also 503 to every failEvery-th request (0: never)
	arrived   map[string][]int
	ok        map[string][]int // 2xx answers, in order
	answered  map[string]int   // the highest seq answered 2xx
	early     []string
	n         int
}

func newOrderPartner(fail ...string) *orderPartner {
	p := &orderPartner{fail: map[string]bool{}, arrived: map[string][]int{}, ok: map[string][]int{}, answered: map[string]int{}}
	for _, f := range fail {
		p.fail[f] = true
	}
	return p
}

func (p *orderPartner) handle(w http.ResponseWriter, r *http.Request, _ int) {
	key := r.Header.Get("X-Key")
	seq, _ := strconv.Atoi(r.Header.Get("X-Seq"))
	name := fmt.Sprintf("%s/%d", key, seq)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	p.arrived[key] = append(p.arrived[key], seq)
	if seq > 1 && p.answered[key] < seq-1 {
		p.early = append(p.early, fmt.Sprintf("%s arrived before %s/%d was answered 2xx", name, key, seq-1))
	}
	if p.fail[name] {
		delete(p.fail, name)
		w.Header().Set("Retry-After", "2")
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if p.failEvery > 0 && p.n%p.failEvery == 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	// Marked before the answer leaves: hookpace can only send the next
	// one after it has read this answer.
	p.answered[key] = max(p.answered[key], seq)
	p.ok[key] = append(p.ok[key], seq)
	w.WriteHeader(http.StatusOK)
}

func (p *orderPartner) seqs(key string) (arrived, ok []int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.arrived[key]...), append([]int(nil), p.ok[key]...)
}

func (p *orderPartner) earlyOnes() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.early...)
}

// keysInOrder fails t for each key k0..k(keys-1) whose 2xx answers are
// not 1..per in order, each once, and returns the inversions among all
// keys' arrivals (a seq arriving after a higher one of its key).
func (p *orderPartner) keysInOrder(t *testing.T, keys, per int) (inversions int) {
	t.Helper()
	want := make([]int, per)
	for i := range want {
		want[i] = i + 1
	}
	for k := range keys {
		arrived, ok := p.seqs(fmt.Sprint("k", k))
		high := 0
		for _, seq := range arrived {
			if seq < high {
				inversions++
			}
			high = max(high, seq)
		}
		if fmt.Sprint(ok) != fmt.Sprint(want) {
			t.Errorf("k%d's 2xx %v, want 1..%d in order, each once", k, ok, per)
		}
	}
	return inversions
}

func orderHeader(key string, seq int) http.Header {
	return http.Header{"Hookpace-Ordering-Key": {key}, "X-Key": {key}, "X-Seq": {strconv.Itoa(seq)}}
}

// An ordering key's webhooks go one at a time, each after the previous
// one's 200, across a retry of the first (a 503); another key's arrive
// meanwhile.
func TestOrderingKeyRetryE2E(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	p := newOrderPartner("order-1/1")
	rc.Handle = p.handle
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 50/s, burst: 5, concurrency: 4}
`, rc.Host()))
	c := hp.Client()
	for _, key := range []string{"order-1", "order-2"} {
		for seq := 1; seq <= 5; seq++ {
			if status, _, body := PostRaw(t, c, rc.URL+"/"+key, WebhookBody(seq), orderHeader(key, seq)); status != http.StatusAccepted {
				t.Fatalf("%s/%d: %d %s", key, seq, status, body)
			}
		}
	}
	rc.WaitFor(t, 30*time.Second, "both keys' webhooks delivered", func(as []Arrival) bool { return Delivered2xx(as) == 10 })
	a1, ok1 := p.seqs("order-1")
	if fmt.Sprint(a1) != "[1 1 2 3 4 5]" || fmt.Sprint(ok1) != "[1 2 3 4 5]" {
		t.Errorf("order-1 arrived %v (2xx %v), want [1 1 2 3 4 5] (2xx [1 2 3 4 5])", a1, ok1)
	}
	if _, ok2 := p.seqs("order-2"); fmt.Sprint(ok2) != "[1 2 3 4 5]" {
		t.Errorf("order-2's 2xx: %v, want [1 2 3 4 5]", ok2)
	}
	for _, e := range p.earlyOnes() {
		t.Error(e)
	}
	// order-2 went on while order-1's first webhook waited for its retry.
	as := rc.Arrivals()
	first, retry, other := -1, -1, 0
	for i, a := range as {
		switch {
		case a.Path == "/order-1" && a.Header.Get("X-Seq") == "1" && first < 0:
			first = i
		case a.Path == "/order-1" && a.Header.Get("X-Seq") == "1":
			retry = i
		case a.Path == "/order-2" && first >= 0 && retry < 0:
			other++
		}
	}
	if other == 0 {
		t.Errorf("no webhook of order-2 arrived while order-1's first waited for its retry (arrivals %d, retry at %d)", first, retry)
	}
}

// Ordered webhooks queued to a paused host keep their order across a
// kill -9 and a restart, to a partner that answers 503 to every 7th
// request.
func TestOrderingAcrossKillE2E(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	p := newOrderPartner()
	p.failEvery = 7
	rc.Handle = p.handle
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 200/s, burst: 10, concurrency: 8, backoff_initial: 100ms, backoff_max: 200ms, max_attempts: 50}
`, rc.Host()))
	pauseHost(t, hp, rc.Host())
	const keys, per = 6, 10
	c := hp.Client()
	for seq := 1; seq <= per; seq++ {
		for k := range keys {
			key := fmt.Sprintf("k%d", k)
			if status, _, body := PostRaw(t, c, rc.URL+"/"+key, WebhookBody(seq), orderHeader(key, seq)); status != http.StatusAccepted {
				t.Fatalf("%s/%d: %d %s", key, seq, status, body)
			}
		}
	}
	c.CloseIdleConnections()
	hp.Kill()
	hp.Restart()
	resumeHost(t, hp, rc.Host())
	rc.WaitFor(t, 60*time.Second, "every ordered webhook delivered", func(as []Arrival) bool { return Delivered2xx(as) == keys*per })
	want := fmt.Sprint([]int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	for k := range keys {
		key := fmt.Sprintf("k%d", k)
		if arrived, ok := p.seqs(key); fmt.Sprint(ok) != want {
			t.Errorf("%s: 2xx in order %v (arrived %v), want %s", key, ok, arrived, want)
		}
	}
	for _, e := range p.earlyOnes() {
		t.Error(e)
	}
}

// A delayed webhook does not hold back the plain ones behind it, and
// arrives no sooner than its delay after it was sent.
func TestDelayE2E(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 50/s, concurrency: 1}
`, rc.Host()))
	c := hp.Client()
	sent := time.Now()
	if status, _, body := PostRaw(t, c, rc.URL+"/delayed", WebhookBody(0), http.Header{"Hookpace-Delay": {"3s"}}); status != http.StatusAccepted {
		t.Fatalf("delayed: %d %s", status, body)
	}
	for i := 1; i <= 3; i++ {
		if status, _, body := PostRaw(t, c, fmt.Sprintf("%s/plain/%d", rc.URL, i), WebhookBody(i), nil); status != http.StatusAccepted {
			t.Fatalf("plain %d: %d %s", i, status, body)
		}
	}
	rc.WaitFor(t, 30*time.Second, "all four delivered", func(as []Arrival) bool { return Delivered2xx(as) == 4 })
	as := rc.Arrivals()
	if as[3].Path != "/delayed" {
		t.Fatalf("arrival order %v, want the delayed one last", paths(as))
	}
	if due := sent.Add(3 * time.Second); as[3].At.Before(due) {
		t.Errorf("the delayed webhook arrived %v before its not-before", due.Sub(as[3].At))
	}
}

func paths(as []Arrival) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.Path
	}
	return out
}

// With the host paused, 50 low then 50 high: once resumed, high goes
// first, and low still gets its min_share of the turns; the same after a
// kill -9 and a restart.
func TestPriorityE2E(t *testing.T) {
	t.Parallel()
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprint("restart=", restart), func(t *testing.T) { priorityCase(t, restart) })
	}
}

// priorityCase queues 50 low then 50 high to a paused host, kills
// hookpace and starts it again if restart, and resumes the host.
func priorityCase(t *testing.T, restart bool) {
	rc := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 100/s, burst: 1, concurrency: 1, priority: {min_share: 0.1}}
`, rc.Host()))
	pauseHost(t, hp, rc.Host())
	c := hp.Client()
	for i := range 100 {
		prio := "low"
		if i >= 50 {
			prio = "high"
		}
		if status, _, body := PostRaw(t, c, fmt.Sprintf("%s/%s/%d", rc.URL, prio, i), WebhookBody(i), http.Header{"Hookpace-Priority": {prio}}); status != http.StatusAccepted {
			t.Fatalf("%s %d: %d %s", prio, i, status, body)
		}
	}
	if restart {
		hp.Kill()
		hp.Restart()
	}
	resumeHost(t, hp, rc.Host())
	rc.WaitFor(t, 30*time.Second, "all 100 delivered", func(as []Arrival) bool { return Delivered2xx(as) == 100 })
	as := rc.Arrivals()
	low := 0
	for _, a := range as[:50] {
		if a.Path[:5] == "/low/" {
			low++
		}
	}
	// min_share 0.1 of 50 turns is 5 for low; one more may have been
	// staged before the high ones came.
	if low < 4 || low > 7 {
		t.Errorf("%d low among the first 50 arrivals, want about 5 (min_share 0.1): %v", low, paths(as[:50]))
	}
	t.Logf("first 50 arrivals: %d low, %d high", low, 50-low)
}

// 2,000 fairness keys of 2 webhooks each, queued to a paused host: all
// arrive once, each key's in the order they were sent.
func TestManyFairnessKeysE2E(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 2000/s, burst: 50, concurrency: 16, fairness: {key: header}}
`, rc.Host()))
	pauseHost(t, hp, rc.Host())
	const keys = 2000
	// Webhook i is key i%2000's: its first, then (after every first's 202)
	// its second.
	key := func(i int) http.Header { return http.Header{"Hookpace-Fairness-Key": {fmt.Sprint("key-", i%keys)}} }
	postKeyed(t, hp, rc, 0, keys, 16, key)
	postKeyed(t, hp, rc, keys, 2*keys, 16, key)
	resumeHost(t, hp, rc.Host())
	rc.WaitFor(t, 60*time.Second, "every webhook delivered", func(as []Arrival) bool { return Delivered2xx(as) >= 2*keys })
	as := rc.Arrivals()
	onceEach(t, as, 2*keys)
	at := map[string]int{}
	for i, a := range as {
		at[a.Path] = i
	}
	for k := range keys {
		first, second := fmt.Sprint("/hook/", k), fmt.Sprint("/hook/", k+keys)
		if at[first] > at[second] {
			t.Errorf("key-%d's second webhook arrived before its first (arrivals %d, %d)", k, at[second], at[first])
		}
	}
	var hv struct {
		Lanes *struct{ Keys int } `json:"lanes"`
	}
	hp.AdminJSON("/v1/hosts/"+rc.Host(), &hv)
	t.Logf("after delivery: lanes %+v", hv.Lanes)
}

// Webhooks without a fairness key share the key "", a key like the
// others: an untagged bulk does not bury a tagged tenant's webhook
// either, although the host met no key before it.
func TestFairnessUntaggedBulkE2E(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 20/s, burst: 2, concurrency: 2, fairness: {key: header}}
`, rc.Host()))
	const bulk = 1000
	postKeyed(t, hp, rc, 0, bulk, 16, func(int) http.Header { return nil })
	status, _, body := PostRaw(t, hp.Client(), rc.URL+"/tenant-b", WebhookBody(-1), http.Header{"Hookpace-Fairness-Key": {"tenant-b"}})
	before := rc.Count(nil)
	if status != http.StatusAccepted {
		t.Fatalf("tenant-b: %d %s", status, body)
	}
	rc.WaitFor(t, 60*time.Second, "tenant-b's webhook", func(as []Arrival) bool {
		return slices.ContainsFunc(as, func(a Arrival) bool { return a.Path == "/tenant-b" })
	})
	at := slices.IndexFunc(rc.Arrivals(), func(a Arrival) bool { return a.Path == "/tenant-b" })
	if between := at - before; between > 4 {
		t.Errorf("%d untagged webhooks arrived between tenant-b's 202 and its arrival, want at most 4", between)
	}
}
