package handoff

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

	"github.com/hookpace/hookpace/spool"
)

// lanedSpool opens a real spool with webhooks in several lanes of two
// hosts: for each host, keys ordered per ordering key (o0..o3, 10 each,
// interleaved, some under fairness key A), plus webhooks without an
// ordering key at high and low priority and a delayed one.
func lanedSpool(t *testing.T) *spool.Spool {
	t.Helper()
	sp, err := spool.Open(spool.Options{Dir: filepath.Join(t.TempDir(), "spool"), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	add := func(host string, i int, set func(m *spool.Message)) {
		m := &spool.Message{Host: host, Method: "POST", URL: fmt.Sprintf("http://%s/hooks/%d", host, i),
			Header: http.Header{"X-Seq": {strconv.Itoa(i)}}, Body: []byte(strconv.Itoa(i)), Enqueued: time.Now()}
		set(m)
		if err := sp.Append(context.Background(), m, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, host := range []string{"h1.example", "h2.example"} {
		for i := range 40 {
			add(host, i, func(m *spool.Message) {
				m.Ordering = fmt.Sprintf("o%d", i%4)
				if i%4 >= 2 {
					m.Fairness = "A"
				}
			})
		}
		add(host, 100, func(m *spool.Message) { m.Fairness, m.Priority = "B", spool.PriorityHigh })
		add(host, 101, func(m *spool.Message) { m.Priority = spool.PriorityLow })
		add(host, 102, func(m *spool.Message) { m.NotBefore = time.Now().Add(time.Hour) })
		add(host, 103, func(m *spool.Message) { m.NotBefore = time.Now().Add(-time.Hour) })
	}
	return sp
}

// laneTarget is a target that records every request and answers 202, or
// 503 where ok says no.
type laneTarget struct {
	*httptest.Server
	mu  sync.Mutex
	got []got
}

func newLaneTarget(t *testing.T, ok func(r *http.Request) bool, done func(r *http.Request)) *laneTarget {
	tg := &laneTarget{}
	var n atomic.Int64
	tg.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ok(r) {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		tg.mu.Lock()
		tg.got = append(tg.got, got{requestURI: r.RequestURI, host: r.Host, header: r.Header})
		tg.mu.Unlock()
		accept(w, n.Add(1))
		if done != nil {
			// Once the 202 is written, before the sender can read it: an
			// ordering key's next request that came before this would
			// have been counted as an overlap.
			done(r)
		}
	}))
	t.Cleanup(tg.Close)
	return tg
}

// Every lane of every host is handed off with its lane headers; the
// webhooks of each ordering key arrive one at a time, in their order.
func TestHandsOffLanesInOrder(t *testing.T) {
	var mu sync.Mutex
	inFlight := map[string]bool{} // ordering keys with a request in flight
	var overlaps []string
	tg := newLaneTarget(t, func(r *http.Request) bool {
		key := r.Host + "/" + r.Header.Get("Hookpace-Fairness-Key") + "/" + r.Header.Get("Hookpace-Ordering-Key")
		if r.Header.Get("Hookpace-Ordering-Key") == "" {
			return true
		}
		mu.Lock()
		if inFlight[key] {
			overlaps = append(overlaps, key)
		}
		inFlight[key] = true
		mu.Unlock()
		return true
	}, func(r *http.Request) {
		mu.Lock()
		inFlight[r.Host+"/"+r.Header.Get("Hookpace-Fairness-Key")+"/"+r.Header.Get("Hookpace-Ordering-Key")] = false
		mu.Unlock()
	})
	sp := lanedSpool(t)
	res, err := Run(context.Background(), Options{Target: tg.URL, Queue: sp, Concurrency: 8, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Queued != 88 || res.HandedOff != 88 || res.Left != 0 {
		t.Fatalf("result %+v", res)
	}
	if len(overlaps) > 0 {
		t.Fatalf("ordering keys sent two at a time: %v", overlaps)
	}
	last := map[string]int{}
	for _, g := range tg.got {
		seq, _ := strconv.Atoi(g.header.Get("X-Seq"))
		fk, ok, pr, nb := g.header.Get("Hookpace-Fairness-Key"), g.header.Get("Hookpace-Ordering-Key"), g.header.Get("Hookpace-Priority"), g.header.Get("Hookpace-Not-Before")
		switch {
		case seq < 100:
			if want := fmt.Sprintf("o%d", seq%4); ok != want || (seq%4 >= 2) != (fk == "A") || pr != "" || nb != "" {
				t.Fatalf("webhook %d: headers %v", seq, g.header)
			}
			key := g.host + "/" + ok
			if prev, seen := last[key]; seen && prev >= seq {
				t.Fatalf("key %s: %d arrived after %d", key, seq, prev)
			}
			last[key] = seq
		case seq == 100 && (fk != "B" || pr != "high"),
			seq == 101 && (fk != "" || pr != "low"),
			seq == 103 && nb != "",
			seq < 102 && nb != "" || seq != 100 && seq != 101 && pr != "" || ok != "":
			t.Fatalf("webhook %d: headers %v", seq, g.header)
		case seq == 102:
			at, err := http.ParseTime(nb)
			if err != nil || at.Before(time.Now().Add(59*time.Minute)) || at.After(time.Now().Add(61*time.Minute)) {
				t.Fatalf("webhook 102: Hookpace-Not-Before %q", nb)
			}
		}
	}
	if len(last) != 8 {
		t.Fatalf("ordering keys seen: %v", last)
	}
}

// Once a webhook of an ordering key is kept here, its later ones stay
// too; other keys go on.
func TestOrderedKeyStopsAtKept(t *testing.T) {
	tg := newLaneTarget(t, func(r *http.Request) bool {
		return r.Host != "h1.example" || r.Header.Get("X-Seq") != "9" // o1's third: 503
	}, nil)
	sp := lanedSpool(t)
	var log bytes.Buffer
	res, err := Run(context.Background(), Options{Target: tg.URL, Queue: sp, Concurrency: 4, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(log.String(), "an ordering key split"); n != 1 || !strings.Contains(log.String(), "ordering_key=o1") {
		t.Errorf("%d split errors, want one naming o1:\n%s", n, log.String())
	}
	// o1 of h1: 1 and 5 went; 9 got a 503; 13 .. 37 (7 more) stay behind it.
	if res.HandedOff != 88-8 || res.Left != 8 || res.Kept["status_503"] != 1 || res.Kept[keptBehind] != 7 {
		t.Fatalf("result %+v", res)
	}
	left, _, err := sp.ReadHost("h1.example", spool.HostCursor{}, 100)
	if err != nil || len(left) != 8 {
		t.Fatalf("left %d, %v", len(left), err)
	}
	for i, m := range left {
		if m.Ordering != "o1" || m.Header.Get("X-Seq") != strconv.Itoa(9+4*i) {
			t.Fatalf("left[%d]: %s seq %s", i, m.Ordering, m.Header.Get("X-Seq"))
		}
	}
}
