package deliver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// put queues the given messages, assigning their ids, as the spool would
// announce them.
func (q *memQueue) put(ms ...*spool.Message) {
	q.mu.Lock()
	for _, m := range ms {
		q.seq++
		m.ID = q.seq
		if m.Enqueued.IsZero() {
			m.Enqueued = time.Now()
		}
		if q.queued[m.Host] == nil {
			q.queued[m.Host] = map[uint64]*spool.Message{}
		}
		c := *m
		q.queued[m.Host][m.ID] = &c
	}
	notify := q.notify
	q.mu.Unlock()
	if notify != nil {
		notify(ms)
	}
}

// jsonHooks returns n webhooks to host with JSON bodies {"n": i}, to
// path(i).
func jsonHooks(host string, n int, path func(i int) string) []*spool.Message {
	var ms []*spool.Message
	for i := range n {
		ms = append(ms, &spool.Message{Host: host, Method: "POST", URL: "http://" + host + path(i),
			Header: http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer t"}, "X-Event": {fmt.Sprint("e", i)}},
			Body:   []byte(fmt.Sprintf(`{"n": %d}`, i))})
	}
	return ms
}

func samePath(int) string { return "/hooks" }

func batchPolicy(events, bytes int, wait time.Duration) Policy {
	p := policy(100, 10, 2)
	p.Batch = &Batch{MaxEvents: events, MaxBytes: bytes, MaxWait: wait}
	return p
}

// members decodes a json-array batch's body into its members' "n".
func members(t *testing.T, body string) []int {
	t.Helper()
	var els []struct{ N int }
	if err := json.Unmarshal([]byte(body), &els); err != nil {
		t.Fatalf("batch body is not a JSON array: %v: %.80q", err, body)
	}
	var ns []int
	for _, e := range els {
		ns = append(ns, e.N)
	}
	return ns
}

// exactlyOnce checks that the batches' members are 0..n-1, each once, and
// in order within each batch.
func exactlyOnce(t *testing.T, got []arrival, n int) {
	t.Helper()
	var all []int
	for _, a := range got {
		ns := members(t, a.body)
		if !slices.IsSorted(ns) {
			t.Errorf("a batch out of order: %v", ns)
		}
		all = append(all, ns...)
	}
	slices.Sort(all)
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(all, want) {
		t.Fatalf("members over all batches: %v, want 0..%d each once", all, n-1)
	}
}

func TestBatchFlushesOnSize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		d, q := setup(t, rc, map[string]Policy{"b.example": batchPolicy(50, 1<<20, time.Second)}, 0)
		q.put(jsonHooks("b.example", 200, samePath)...)
		waitEmpty(t, q, time.Minute)
		synctest.Wait()
		if hs, _ := d.Host("b.example"); hs.Delivered != 200 || d.Delivered() != 200 {
			t.Errorf("delivered: %d to the host, %d in all; want 200 webhooks (the status page's history)", hs.Delivered, d.Delivered())
		}
		got := rc.arrivals("b.example")
		if len(got) != 4 {
			t.Fatalf("%d requests for 200 webhooks with max_events 50, want 4", len(got))
		}
		for _, a := range got {
			if n := len(members(t, a.body)); n != 50 {
				t.Errorf("a batch of %d, want 50", n)
			}
			if ct := a.hdr.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			if a.hdr.Get("Authorization") != "Bearer t" || a.hdr.Get("X-Event") != "" {
				t.Errorf("batch headers %v: want those all members share (Authorization), not per-member ones (X-Event)", a.hdr)
			}
		}
		exactlyOnce(t, got, 200)
		if q.deleted != 200 {
			t.Fatalf("%d deleted, want 200", q.deleted)
		}
	})
}

func TestBatchFlushesOnBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		_, q := setup(t, rc, map[string]Policy{"b.example": batchPolicy(500, 1024, time.Second)}, 0)
		ms := jsonHooks("b.example", 100, samePath)
		for i, m := range ms {
			m.Body = fmt.Appendf(nil, `{"n": %d, "pad": "%s"}`, i, strings.Repeat("x", 80))
		}
		q.put(ms...)
		waitEmpty(t, q, time.Minute)
		got := rc.arrivals("b.example")
		for _, a := range got {
			if len(a.body) > 1024 {
				t.Fatalf("a batch of %d bytes, max_bytes 1024", len(a.body))
			}
		}
		// Each member is about 100 bytes: 10 to a batch, never 11.
		if len(got) != 10 {
			t.Fatalf("%d requests, want 10", len(got))
		}
		exactlyOnce(t, got, 100)
	})
}

func TestBatchWaitsForCompanyUpToMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		_, q := setup(t, rc, map[string]Policy{"b.example": batchPolicy(50, 1<<20, 2*time.Second)}, 0)
		start := time.Now()
		q.put(jsonHooks("b.example", 1, samePath)...)
		time.Sleep(time.Second)
		q.put(jsonHooks("b.example", 2, samePath)...)
		waitEmpty(t, q, time.Minute)
		got := rc.arrivals("b.example")
		if len(got) != 1 {
			t.Fatalf("%d requests, want the three webhooks in one", len(got))
		}
		if n := len(members(t, got[0].body)); n != 3 {
			t.Fatalf("a batch of %d, want 3", n)
		}
		if at := got[0].at.Sub(start); at != 2*time.Second {
			t.Fatalf("sent %v after the first webhook, want its max_wait, 2s", at)
		}
	})
}

func TestBatchKeepsURLsApartAndSendsOthersAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		_, q := setup(t, rc, map[string]Policy{"b.example": batchPolicy(50, 1<<20, 0)}, 0)
		ms := jsonHooks("b.example", 20, func(i int) string { return []string{"/a", "/b"}[i%2] })
		ms[7].Header.Set("Content-Type", "text/plain")
		ms[8].Body = []byte(`{"n": 8,`) // says JSON, is not
		q.put(ms...)
		waitEmpty(t, q, time.Minute)
		got := rc.arrivals("b.example")
		if len(got) != 4 {
			t.Fatalf("%d requests, want 4: a batch per URL and the two that are not JSON alone", len(got))
		}
		var alone []string
		for _, a := range got {
			if !strings.HasPrefix(a.body, "[") {
				alone = append(alone, a.body)
				continue
			}
			for _, n := range members(t, a.body) {
				if want := []string{"/a", "/b"}[n%2]; a.path != want {
					t.Errorf("member %d in the batch to %s, want %s", n, a.path, want)
				}
			}
		}
		slices.Sort(alone)
		if !slices.Equal(alone, []string{`{"n": 7}`, `{"n": 8,`}) {
			t.Fatalf("sent alone: %q, want the text/plain one and the broken JSON one, as they were", alone)
		}
	})
}

func TestFailedBatchIsRetriedWhole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{handle: func(r *http.Request, n int) (int, http.Header) {
			if n == 1 {
				return 503, nil
			}
			return 200, nil
		}}
		p := batchPolicy(10, 1<<20, 0)
		p.IDHeader, p.AttemptHeader = "X-Hookpace-Id", "X-Hookpace-Attempt"
		_, q := setup(t, rc, map[string]Policy{"b.example": p}, 0)
		q.put(jsonHooks("b.example", 10, samePath)...)
		synctest.Wait()
		later := jsonHooks("b.example", 15, samePath)[10:]
		q.put(later...) // company that must not join the retry
		waitEmpty(t, q, time.Minute)
		got := rc.arrivals("b.example")
		if len(got) != 3 {
			t.Fatalf("%d requests, want 3 (the batch, its retry, the 5 that came later)", len(got))
		}
		var tries []arrival
		for _, a := range got {
			switch ns := members(t, a.body); {
			case len(ns) == 10:
				tries = append(tries, a)
			case !slices.Equal(ns, []int{10, 11, 12, 13, 14}):
				t.Fatalf("a batch of %v", ns)
			}
		}
		if len(tries) != 2 || tries[1].body != tries[0].body {
			t.Fatalf("%d requests carry the first 10, want the batch and its retry, the same", len(tries))
		}
		id := spool.IDString(1) + "-" + spool.IDString(10)
		for i, a := range tries {
			if a.hdr.Get("X-Hookpace-Id") != id || a.hdr.Get("X-Hookpace-Attempt") != fmt.Sprint(i+1) {
				t.Errorf("attempt %d: id %q attempt %q, want %q and %d", i+1, a.hdr.Get("X-Hookpace-Id"), a.hdr.Get("X-Hookpace-Attempt"), id, i+1)
			}
		}
		if q.updates != 10 {
			t.Fatalf("%d members' state persisted after the failure, want 10", q.updates)
		}
	})
}

func TestPermanentFailureBuriesEachMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{handle: func(*http.Request, int) (int, http.Header) { return 422, nil }}
		_, q := setup(t, rc, map[string]Policy{"b.example": batchPolicy(10, 1<<20, 0)}, 0)
		q.put(jsonHooks("b.example", 10, samePath)...)
		waitEmpty(t, q, time.Minute)
		if n := len(rc.arrivals("b.example")); n != 1 {
			t.Fatalf("%d requests, want 1", n)
		}
		if len(q.dead) != 10 {
			t.Fatalf("%d dead letters, want one per member, 10", len(q.dead))
		}
		for i, m := range q.dead {
			if want := fmt.Sprintf(`{"n": %d}`, i); string(m.Body) != want || q.why[i] != "permanent status 422" {
				t.Errorf("dead letter %d: %q (%s), want %q as it was sent alone", i, m.Body, q.why[i], want)
			}
		}
	})
}

func TestHeldBatchGoesFirstAfterTheHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{handle: func(r *http.Request, n int) (int, http.Header) {
			if n == 1 {
				return 429, http.Header{"Retry-After": {"3"}}
			}
			return 200, nil
		}}
		_, q := setup(t, rc, map[string]Policy{"b.example": batchPolicy(5, 1<<20, 0)}, 0)
		q.put(jsonHooks("b.example", 5, samePath)...)
		synctest.Wait()
		q.put(jsonHooks("b.example", 5, samePath)...)
		waitEmpty(t, q, time.Minute)
		got := rc.arrivals("b.example")
		if len(got) != 3 || got[1].body != got[0].body {
			t.Fatalf("%d requests, second %q: want the held batch again first, then the next", len(got), got[1].body)
		}
		if gap := got[1].at.Sub(got[0].at); gap != 3*time.Second {
			t.Fatalf("held %v, want Retry-After's 3s", gap)
		}
		if len(q.dead) != 0 || q.updates != 0 {
			t.Fatal("a 429 used up attempts")
		}
	})
}

func TestBatchTakesOneToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		p := batchPolicy(10, 1<<20, 0)
		p.Limits.Rate, p.Limits.Burst = 1, 1
		_, q := setup(t, rc, map[string]Policy{"b.example": p}, 0)
		start := time.Now()
		q.put(jsonHooks("b.example", 100, samePath)...)
		waitEmpty(t, q, time.Minute)
		got := rc.arrivals("b.example")
		if len(got) != 10 {
			t.Fatalf("%d requests, want 10", len(got))
		}
		if took := got[9].at.Sub(start); took < 9*time.Second || took >= 10*time.Second {
			t.Fatalf("the 10th batch went after %v, want about 9s at 1/s", took)
		}
		exactlyOnce(t, got, 100)
	})
}

func TestEnvelope(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		p := batchPolicy(3, 1<<20, 0)
		p.Batch.Envelope, p.Batch.Headers = true, []string{"X-Event", "X-Absent"}
		_, q := setup(t, rc, map[string]Policy{"b.example": p}, 0)
		q.put(jsonHooks("b.example", 3, samePath)...)
		waitEmpty(t, q, time.Minute)
		got := rc.arrivals("b.example")
		if len(got) != 1 {
			t.Fatalf("%d requests, want 1", len(got))
		}
		var env struct {
			Events []struct {
				ID         string            `json:"id"`
				ReceivedAt time.Time         `json:"received_at"`
				Headers    map[string]string `json:"headers"`
				Body       struct{ N int }   `json:"body"`
			} `json:"events"`
		}
		if err := json.Unmarshal([]byte(got[0].body), &env); err != nil || len(env.Events) != 3 {
			t.Fatalf("envelope %q: %v", got[0].body, err)
		}
		for i, e := range env.Events {
			if e.ID != spool.IDString(uint64(i+1)) || e.Body.N != i || !e.ReceivedAt.Equal(time.Now()) && e.ReceivedAt.After(time.Now()) ||
				len(e.Headers) != 1 || e.Headers["X-Event"] != fmt.Sprint("e", i) {
				t.Errorf("event %d: %+v", i, e)
			}
		}
	})
}

// Batching holds for a backlog: 200 queued for a paused host, then
// resumed, go in at most 5 requests.
func TestPausedBacklogGoesInFullBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		d, q := setup(t, rc, map[string]Policy{"b.example": batchPolicy(50, 1<<20, time.Second)}, 0)
		if err := d.Pause("b.example"); err != nil {
			t.Fatal(err)
		}
		q.put(jsonHooks("b.example", 200, samePath)...)
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := len(rc.arrivals("")); n != 0 {
			t.Fatalf("%d requests to a paused host", n)
		}
		if _, err := d.Resume("b.example"); err != nil {
			t.Fatal(err)
		}
		waitEmpty(t, q, time.Minute)
		got := rc.arrivals("b.example")
		if len(got) > 5 {
			t.Fatalf("%d requests, want at most 5", len(got))
		}
		exactlyOnce(t, got, 200)
	})
}

// A reload that turns batching off while a batch waits for its retry
// sends its members alone.
func TestBatchingOffSplitsRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{handle: func(r *http.Request, n int) (int, http.Header) {
			if n == 1 {
				return 503, nil
			}
			return 200, nil
		}}
		d, q := setup(t, rc, map[string]Policy{"b.example": batchPolicy(10, 1<<20, 0)}, 0)
		q.put(jsonHooks("b.example", 3, samePath)...)
		synctest.Wait()
		d.SetPolicy(fixed(policy(100, 10, 2)))
		waitEmpty(t, q, time.Minute)
		got := rc.arrivals("b.example")
		if len(got) != 4 {
			t.Fatalf("%d requests, want the batch and then its 3 members alone", len(got))
		}
		var alone []string
		for _, a := range got[1:] {
			alone = append(alone, a.body)
		}
		slices.Sort(alone)
		if !slices.Equal(alone, []string{`{"n": 0}`, `{"n": 1}`, `{"n": 2}`}) {
			t.Fatalf("after the reload: %q", alone)
		}
	})
}

// A member whose content was replaced by one that is not JSON between
// gathering and sending leaves the batch and goes alone.
func TestReplacedByNonJSONGoesAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		q := newMemQueue()
		q.replace = map[uint64]*spool.Message{
			2: {Header: http.Header{"Content-Type": {"text/plain"}}, Body: []byte("now plain text")},
		}
		d := New(Options{Reader: q, Store: q, Stats: q, Journal: q, Policy: fixed(batchPolicy(10, 1<<20, 0)),
			Client: &http.Client{Transport: rc}, Logger: slog.New(slog.DiscardHandler)})
		if err := d.Start(); err != nil {
			t.Fatal(err)
		}
		defer d.Stop(context.Background())
		q.put(jsonHooks("b.example", 3, samePath)...)
		waitEmpty(t, q, time.Minute)
		got := rc.arrivals("b.example")
		if len(got) != 2 {
			t.Fatalf("%d requests, want the batch of two and the replaced one alone", len(got))
		}
		bodies := []string{got[0].body, got[1].body}
		slices.Sort(bodies)
		if bodies[0] != `[{"n": 0},{"n": 2}]` || bodies[1] != "now plain text" {
			t.Fatalf("sent %q", bodies)
		}
	})
}

// When every member was replaced so, the batch's slot is given back
// unused and each goes alone.
func TestAllReplacedByNonJSONGoAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		plain := &spool.Message{Header: http.Header{"Content-Type": {"text/plain"}}, Body: []byte("plain")}
		q := newMemQueue()
		q.replace = map[uint64]*spool.Message{1: plain, 2: plain}
		p := batchPolicy(10, 1<<20, 0)
		p.Limits.Concurrency = 1
		d := New(Options{Reader: q, Store: q, Stats: q, Journal: q, Policy: fixed(p),
			Client: &http.Client{Transport: rc}, Logger: slog.New(slog.DiscardHandler)})
		if err := d.Start(); err != nil {
			t.Fatal(err)
		}
		defer d.Stop(context.Background())
		q.put(jsonHooks("b.example", 2, samePath)...)
		waitEmpty(t, q, time.Minute)
		got := rc.arrivals("b.example")
		if len(got) != 2 || got[0].body != "plain" || got[1].body != "plain" {
			t.Fatalf("%d requests (%v), want the two alone", len(got), got)
		}
	})
}

// A partner that takes at most 3 webhooks a request and answers
// 413 above that. The batch of 10 is split in halves, at once, down to
// what the partner takes: all 10 arrive, none is a dead letter, and no
// member used up an attempt on the way.
func TestTooLargeBatchIsSplit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		answer string
	}{
		{"413", http.StatusRequestEntityTooLarge, ""},
		{"400 naming the size", http.StatusBadRequest, `{"error": "batch exceeds the maximum of 3 events"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rc := &receiver{answer: tc.answer}
				rc.handle = func(r *http.Request, n int) (int, http.Header) {
					var els []json.RawMessage
					if json.Unmarshal([]byte(rc.arrivals("")[n-1].body), &els) != nil || len(els) > 3 {
						return tc.status, nil
					}
					return 200, nil
				}
				p := batchPolicy(10, 1<<20, 0)
				p.MaxAttempts = 1 // a split that counted as an attempt would bury
				p.AttemptHeader = "X-Hookpace-Attempt"
				_, q := setup(t, rc, map[string]Policy{"b.example": p}, 0)
				start := time.Now()
				q.put(jsonHooks("b.example", 10, samePath)...)
				waitEmpty(t, q, time.Minute)
				if len(q.dead) != 0 {
					t.Fatalf("%d dead letters (%v), want none", len(q.dead), q.why)
				}
				var sizes []int
				var delivered []arrival
				for _, a := range rc.arrivals("b.example") {
					ns := members(t, a.body)
					sizes = append(sizes, len(ns))
					if len(ns) <= 3 {
						delivered = append(delivered, a)
					}
					if a.hdr.Get("X-Hookpace-Attempt") != "1" {
						t.Errorf("a split sent as attempt %s, want 1: a split is not an attempt", a.hdr.Get("X-Hookpace-Attempt"))
					}
					if a.at != start {
						t.Errorf("a part sent %v after the batch, want at once", a.at.Sub(start))
					}
				}
				// 10 -> 5 + 5 -> 3 + 2 + 3 + 2 (two slots: in some order)
				slices.Sort(sizes)
				if want := []int{2, 2, 3, 3, 5, 5, 10}; !slices.Equal(sizes, want) {
					t.Errorf("requests of %v webhooks, want %v", sizes, want)
				}
				exactlyOnce(t, delivered, 10)
				if q.updates != 0 {
					t.Errorf("%d members' state persisted, want none: a split is not an attempt", q.updates)
				}
			})
		})
	}
}

// A 400 that does not speak of a size is a permanent failure, as before,
// and a 413 to a webhook alone buries it.
func TestTooLarge(t *testing.T) {
	for _, tc := range []struct {
		status int
		answer string
		want   bool
	}{
		{413, "", true},
		{400, "Request Entity Too Large", true},
		{400, `{"message":"Payload size exceeds limit"}`, true},
		{400, `{"error":"too many events in one request (max 100)"}`, true},
		{400, `{"error":"invalid signature"}`, false},
		{400, "", false},
		{422, "too large", false},
		{500, "too large", false},
	} {
		if got := tooLarge(tc.status, []byte(tc.answer)); got != tc.want {
			t.Errorf("tooLarge(%d, %q) = %v, want %v", tc.status, tc.answer, got, tc.want)
		}
	}
}
