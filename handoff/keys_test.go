package handoff_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookpace/hookpace/egress"
	"github.com/hookpace/hookpace/handoff"
	"github.com/hookpace/hookpace/proxy"
	"github.com/hookpace/hookpace/spool"
)

// An ordering key goes whole or not at all, between two real spools: the
// sender's, and the one behind a real receiving hookpace's proxy (its
// staging and its commit), reached over HTTP through a listener that
// cuts connections the way a restart or an outage does.

var keySecret = []byte("0123456789abcdef0123456789abcdef")

var keyHosts = []string{"h1.example", "h2.example"}

const keysPerHost, perKey = 4, 10

func quietLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

func openSpool(t *testing.T) *spool.Spool {
	t.Helper()
	sp, err := spool.Open(spool.Options{Dir: filepath.Join(t.TempDir(), "spool"), Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	return sp
}

// keyedSpool is a sender's spool: for each host, keysPerHost ordering
// keys of perKey webhooks, interleaved (X-Seq numbers them within the
// host), and three without a key.
func keyedSpool(t *testing.T) *spool.Spool {
	sp := openSpool(t)
	for _, host := range keyHosts {
		for i := range keysPerHost*perKey + 3 {
			m := &spool.Message{Host: host, Method: "POST", URL: fmt.Sprintf("http://%s/hooks/%d", host, i),
				Header: http.Header{"X-Seq": {strconv.Itoa(i)}}, Body: []byte(strconv.Itoa(i)), Enqueued: time.Now()}
			if i < keysPerHost*perKey {
				m.Ordering = fmt.Sprintf("k%d", i%keysPerHost)
			}
			if err := sp.Append(context.Background(), m, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	return sp
}

// receiver is a receiving hookpace's proxy listener: a real proxy on a
// real spool, which cut decides to answer, or to drop the connection of,
// before (lost) or after (answerLost) the proxy took the request.
type receiver struct {
	*httptest.Server
	sp      *spool.Spool
	mu      sync.Mutex
	p       *proxy.Proxy
	batched atomic.Int64 // requests that carried a batch header
	cut     func(n int64, r *http.Request) (lost, answerLost bool)
	log     lockedBuffer // every proxy's log, one after the other's
	// lostAnswer, if set, is called with each answer that was dropped;
	// after with each request answered.
	lostAnswer func(*httptest.ResponseRecorder)
	after      func(*http.Request)
}

// lockedBuffer is a log that several handlers write to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newReceiver(t *testing.T, cut func(n int64, r *http.Request) (lost, answerLost bool)) *receiver {
	rc := &receiver{sp: openSpool(t), cut: cut}
	rc.restart(t)
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var lost, answerLost bool
		if r.Header.Get(handoff.BatchHeader) != "" {
			lost, answerLost = rc.cut(rc.batched.Add(1), r)
		}
		if lost {
			drop(w)
			return
		}
		rc.mu.Lock()
		p := rc.p
		rc.mu.Unlock()
		if answerLost {
			rec := httptest.NewRecorder()
			p.ServeHTTP(rec, r)
			drop(w)
			if rc.lostAnswer != nil {
				rc.lostAnswer(rec)
			}
			return
		}
		p.ServeHTTP(w, r)
		if rc.after != nil {
			rc.after(r)
		}
	}))
	t.Cleanup(rc.Close)
	return rc
}

// restart gives the receiver a new proxy on the same spool: what it had
// staged is gone, as with a restarted hookpace.
func (rc *receiver) restart(t *testing.T) {
	g, err := egress.New(egress.Options{Allow: []string{"127.0.0.0/8"}})
	if err != nil {
		t.Fatal(err)
	}
	pol := proxy.Policy{Host: func(string) proxy.HostPolicy { return proxy.HostPolicy{Connect: proxy.ConnectTunnel} },
		MaxBody: 1 << 20, Methods: []string{"POST"}, HandoffSecret: keySecret}
	p := proxy.New(proxy.Options{Policy: pol, Spool: rc.sp, Guard: g, Transport: &http.Transport{},
		Logger: slog.New(slog.NewTextHandler(&rc.log, nil))})
	rc.mu.Lock()
	rc.p = p
	rc.mu.Unlock()
}

// drop closes the request's connection unanswered.
func drop(w http.ResponseWriter) {
	if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
		c.Close()
	}
}

// fakeClock is the retries' clock: each wait moves it on, nothing sleeps.
type fakeClock struct {
	mu  sync.Mutex
	at  time.Time
	hit func() // called on each wait
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.at }
func (c *fakeClock) sleep(ctx context.Context, d time.Duration) bool {
	c.mu.Lock()
	c.at = c.at.Add(d)
	hit := c.hit
	c.mu.Unlock()
	if hit != nil {
		hit()
	}
	return ctx.Err() == nil
}

// placed is, for each ordering key, the X-Seq of its webhooks in sp, in
// the order sp would deliver them.
func placed(t *testing.T, sp *spool.Spool) map[string][]int {
	t.Helper()
	out := map[string][]int{}
	for _, host := range keyHosts {
		ms, err := sp.Queued(host, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.Ordering == "" {
				continue
			}
			seq, _ := strconv.Atoi(m.Header.Get("X-Seq"))
			out[host+"/"+m.Ordering] = append(out[host+"/"+m.Ordering], seq)
		}
	}
	return out
}

// checkWhole fails unless every key is whole on exactly one side, in its
// order there, and returns how many keys are on each.
func checkWhole(t *testing.T, sender, receiver *spool.Spool) (there, here int) {
	t.Helper()
	at, left := placed(t, receiver), placed(t, sender)
	for _, host := range keyHosts {
		for k := range keysPerHost {
			key := fmt.Sprintf("%s/k%d", host, k)
			var want []int
			for i := k; i < keysPerHost*perKey; i += keysPerHost {
				want = append(want, i)
			}
			switch {
			case len(at[key]) == 0 && fmt.Sprint(left[key]) == fmt.Sprint(want):
				here++
			case len(left[key]) == 0 && fmt.Sprint(at[key]) == fmt.Sprint(want):
				there++
			default:
				t.Errorf("key %s split or out of order: receiver has %v, sender has %v; want %v on one side", key, at[key], left[key], want)
			}
		}
	}
	return there, here
}

// An outage longer than the budget, beginning mid-key: the keys whose
// batch was stored went whole; the key whose chunks were staged when the
// connections began to fail, and those after it, stay with the sender
// whole, and the log names them.
func TestKeyStaysWholePastBudget(t *testing.T) {
	// One worker: h1's four keys go (40 chunks, 4 commits), then the
	// outage begins within h2's first key.
	const through = 4*perKey + 4 + 3
	rc := newReceiver(t, func(n int64, r *http.Request) (bool, bool) { return n > through, false })
	sp := keyedSpool(t)
	clock := &fakeClock{at: time.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour) // the budget, on the test's clock below
	defer cancel()
	var log bytes.Buffer
	o := handoff.Options{Target: rc.URL, Queue: sp, Concurrency: 1, Secret: keySecret, From: "pod-a",
		Logger: slog.New(slog.NewTextHandler(&log, nil))}
	handoff.WithClock(&o, clock.now, clock.sleep)
	res, err := handoff.Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	there, here := checkWhole(t, sp, rc.sp)
	if there != keysPerHost || here != keysPerHost {
		t.Errorf("%d keys at the receiver, %d at the sender; want h1's %d there and h2's %d here", there, here, keysPerHost, keysPerHost)
	}
	if res.Keys != keysPerHost || res.KeysKept != keysPerHost || res.KeysSplit != 0 || res.Retried == 0 {
		t.Errorf("result %+v", res)
	}
	if n := strings.Count(log.String(), "ordering key kept here whole"); n != keysPerHost || !strings.Contains(log.String(), "host=h2.example") ||
		!strings.Contains(log.String(), "reason=connection_error") {
		t.Errorf("%d lines name a key kept here, want %d, with the reason:\n%s", n, keysPerHost, log.String())
	}
	if strings.Contains(log.String(), "split") {
		t.Errorf("a split logged:\n%s", log.String())
	}
}

// The receiver restarts in the middle of a key (its staging is gone, the
// sender's next chunk gets a 409), and again just after storing a key,
// before its 202 is written: every key arrives once, whole and in order;
// the sender keeps nothing; the key whose 202 was lost is not stored
// twice (the claims key it).
func TestKeyWholeAcrossReceiverRestarts(t *testing.T) {
	var rc *receiver
	var restarts atomic.Int64
	var once1, once2 sync.Once
	rc = newReceiver(t, func(n int64, r *http.Request) (bool, bool) {
		b, _ := handoff.ParseBatch(r.Header.Get(handoff.BatchHeader))
		switch {
		case n == 7: // mid-key: the connection drops, the pod restarts
			once1.Do(func() { restarts.Add(1); rc.restart(t) })
			return true, false
		case b.Last && n > 20:
			lost := false
			once2.Do(func() { lost = true })
			if lost {
				return false, true // stored there, the 202 lost with the pod
			}
		}
		return false, false
	})
	var lostStored atomic.Int64
	rc.lostAnswer = func(rec *httptest.ResponseRecorder) {
		if rec.Code == http.StatusAccepted {
			lostStored.Store(int64(count(rec.Header().Get(handoff.StoredHeader))))
		}
		restarts.Add(1)
		rc.restart(t)
	}
	sp := keyedSpool(t)
	clock := &fakeClock{at: time.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	o := handoff.Options{Target: rc.URL, Queue: sp, Concurrency: 3, Secret: keySecret, From: "pod-a", Logger: quietLog()}
	handoff.WithClock(&o, clock.now, clock.sleep)
	res, err := handoff.Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	there, here := checkWhole(t, sp, rc.sp)
	if there != len(keyHosts)*keysPerHost || here != 0 || restarts.Load() != 2 || lostStored.Load() != perKey {
		t.Errorf("%d keys there, %d here after %d restarts (a lost 202 for %d); want all there", there, here, restarts.Load(), lostStored.Load())
	}
	want := len(keyHosts) * (keysPerHost*perKey + 3)
	if res.HandedOff != want || res.Left != 0 || res.Keys != len(keyHosts)*keysPerHost || res.KeysKept+res.KeysSplit != 0 {
		t.Errorf("result %+v, want all %d handed off", res, want)
	}
	if u := rc.sp.Usage(); u.Messages != int64(want) {
		t.Errorf("the receiver holds %d webhooks, want %d: a key stored twice", u.Messages, want)
	}
}

// The receiver stores nothing of a key before its batch's last chunk:
// whenever a chunk comes, its spool holds the keys whose batches ended,
// and the webhooks without a key, nothing more.
func TestReceiverStoresNothingBeforeLastChunk(t *testing.T) {
	var mu sync.Mutex
	var over []string
	var ended, chunks int64
	var rc *receiver
	rc = newReceiver(t, func(n int64, r *http.Request) (bool, bool) {
		b, _ := handoff.ParseBatch(r.Header.Get(handoff.BatchHeader))
		mu.Lock()
		defer mu.Unlock()
		if b.Last {
			ended++
			return false, false
		}
		chunks++
		if held, most := rc.sp.Usage().Messages, ended*perKey+int64(3*len(keyHosts)); held > most {
			over = append(over, fmt.Sprintf("chunk %d: %d held, at most %d", chunks, held, most))
		}
		return false, false
	})
	sp := keyedSpool(t)
	o := handoff.Options{Target: rc.URL, Queue: sp, Concurrency: 2, Secret: keySecret, From: "pod-a", Logger: quietLog()}
	if _, err := handoff.Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if there, _ := checkWhole(t, sp, rc.sp); there != len(keyHosts)*keysPerHost {
		t.Errorf("%d keys there", there)
	}
	if chunks != int64(len(keyHosts)*keysPerHost*perKey) || len(over) > 0 {
		t.Errorf("%d chunks; the receiver stored before a batch ended: %v", chunks, over)
	}
}

func count(v string) int {
	n, err := strconv.Atoi(v)
	if err != nil {
		return -1
	}
	return n
}

// The receiver's spool fills in the middle of a key's commit: it stores
// the first two and answers 429 saying so; the sender deletes those two
// and sends the other eight as a new batch, which goes once there is room
// again. Every key ends whole there, in order, none split.
func TestKeyCommitCutShortSendsTheRest(t *testing.T) {
	var mu sync.Mutex
	cut, lifted := false, false
	var rc *receiver
	rc = newReceiver(t, func(n int64, r *http.Request) (bool, bool) {
		b, _ := handoff.ParseBatch(r.Header.Get(handoff.BatchHeader))
		mu.Lock()
		defer mu.Unlock()
		if b.Last && !cut {
			// Room for two more: past high water (1.0) after them.
			cut = true
			rc.sp.SetLimits(rc.sp.Usage().Messages+2, 0, 1.0, 0.5)
		}
		return false, false
	})
	rc.after = func(*http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if cut && !lifted {
			lifted = true
			rc.sp.SetLimits(0, 0, 0.8, 0.5) // room again
		}
	}
	sp := keyedSpool(t)
	var log bytes.Buffer
	o := handoff.Options{Target: rc.URL, Queue: sp, Concurrency: 1, Secret: keySecret, From: "pod-a",
		Logger: slog.New(slog.NewTextHandler(&log, nil))}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := handoff.Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if there, _ := checkWhole(t, sp, rc.sp); there != len(keyHosts)*keysPerHost {
		t.Errorf("%d keys there", there)
	}
	if !strings.Contains(rc.log.String(), "hand-off batch cut short") || !strings.Contains(rc.log.String(), "stored=2") {
		t.Errorf("the receiver did not cut a batch at 2:\n%s", rc.log.String())
	}
	if res.Keys != len(keyHosts)*keysPerHost || res.KeysSplit+res.KeysKept != 0 || res.Left != 0 {
		t.Errorf("result %+v", res)
	}
}

// Every batch's last chunk goes unanswered (the connection drops before
// the receiver reads it) until the budget ends: every key stays here
// whole, none is stored there, and the log says the last chunks went
// unanswered.
func TestUnansweredLastChunkKeepsKey(t *testing.T) {
	rc := newReceiver(t, func(n int64, r *http.Request) (bool, bool) {
		b, _ := handoff.ParseBatch(r.Header.Get(handoff.BatchHeader))
		return b.Last, false
	})
	sp := keyedSpool(t)
	clock := &fakeClock{at: time.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	var log lockedBuffer
	o := handoff.Options{Target: rc.URL, Queue: sp, Concurrency: 2, Secret: keySecret, From: "pod-a",
		Logger: slog.New(slog.NewTextHandler(&log, nil))}
	handoff.WithClock(&o, clock.now, clock.sleep)
	res, err := handoff.Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if there, here := checkWhole(t, sp, rc.sp); there != 0 || here != len(keyHosts)*keysPerHost {
		t.Errorf("%d keys there, %d here; want all here", there, here)
	}
	if res.KeysKept != len(keyHosts)*keysPerHost || res.Kept["connection_error"] != len(keyHosts)*keysPerHost ||
		strings.Count(log.String(), "last chunk went unanswered") != len(keyHosts)*keysPerHost {
		t.Errorf("result %+v\n%s", res, log.String())
	}
}
