package handoff

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// target stands in for the receiving hookpace's proxy listener: it
// records each proxy-form request and answers with answer(n).
type target struct {
	*httptest.Server
	mu     sync.Mutex
	got    []got
	n      atomic.Int64
	answer func(w http.ResponseWriter, n int64)
}

type got struct {
	requestURI, host, lineage, auth string
	header                          http.Header
	body                            string
}

func newTarget(t *testing.T, answer func(w http.ResponseWriter, n int64)) *target {
	tg := &target{answer: answer}
	tg.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		tg.mu.Lock()
		tg.got = append(tg.got, got{r.RequestURI, r.Host, r.Header.Get(Header), r.Header.Get("Proxy-Authorization"), r.Header, string(b)})
		tg.mu.Unlock()
		tg.answer(w, tg.n.Add(1))
	}))
	t.Cleanup(tg.Close)
	return tg
}

func accept(w http.ResponseWriter, n int64) {
	w.Header().Set("X-Hookpace-Id", fmt.Sprintf("%016x", 1000+n))
	w.WriteHeader(http.StatusAccepted)
}

// queued opens a real spool in a temp dir and appends n webhooks spread
// over three hosts.
func queued(t *testing.T, n int) *spool.Spool {
	t.Helper()
	sp, err := spool.Open(spool.Options{Dir: filepath.Join(t.TempDir(), "spool"), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	for i := range n {
		host := fmt.Sprintf("h%d.example", i%3)
		m := &spool.Message{Host: host, Method: "POST", URL: fmt.Sprintf("http://%s/hooks/%d?q=%d", host, i, i),
			Header: http.Header{"Content-Type": {"application/json"}, "X-Event": {fmt.Sprint(i)}},
			Body:   []byte(fmt.Sprintf(`{"event":%d}`, i)), Enqueued: time.Now()}
		if err := sp.Append(context.Background(), m, 0); err != nil {
			t.Fatal(err)
		}
	}
	return sp
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestHandsOffEverything(t *testing.T) {
	tg := newTarget(t, accept)
	sp := queued(t, 300)
	res, err := Run(context.Background(), Options{Target: "http://app:s3cret@" + tg.Listener.Addr().String(), From: "pod-a",
		Queue: sp, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Queued != 300 || res.HandedOff != 300 || res.Left != 0 || len(res.Kept) != 0 {
		t.Fatalf("result %+v", res)
	}
	if u := sp.Usage(); u.Messages != 0 {
		t.Errorf("spool still holds %d", u.Messages)
	}
	if len(tg.got) != 300 {
		t.Fatalf("target got %d requests", len(tg.got))
	}
	wantAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte("app:s3cret"))
	seen := map[string]bool{}
	for _, g := range tg.got {
		var i int
		if _, err := fmt.Sscanf(g.body, `{"event":%d}`, &i); err != nil {
			t.Fatalf("body %q", g.body)
		}
		host := fmt.Sprintf("h%d.example", i%3)
		// Proxy form: the absolute URL in the request line, the partner's Host.
		if want := fmt.Sprintf("http://%s/hooks/%d?q=%d", host, i, i); g.requestURI != want || g.host != host {
			t.Errorf("request %q Host %q, want %q Host %q", g.requestURI, g.host, want, host)
		}
		if g.header.Get("X-Event") != fmt.Sprint(i) || g.header.Get("Content-Type") != "application/json" {
			t.Errorf("stored headers not sent: %v", g.header)
		}
		if g.header.Get("User-Agent") != "" {
			t.Errorf("User-Agent %q added", g.header.Get("User-Agent"))
		}
		if !strings.HasPrefix(g.lineage, "pod-a/") || seen[g.lineage] {
			t.Errorf("lineage %q", g.lineage)
		}
		seen[g.lineage] = true
		if g.auth != wantAuth {
			t.Errorf("Proxy-Authorization %q, want %q", g.auth, wantAuth)
		}
	}
}

func TestRefusalsKeepWebhooks(t *testing.T) {
	for _, tt := range []struct {
		name   string
		answer func(w http.ResponseWriter, n int64)
		reason string
	}{
		{"503", func(w http.ResponseWriter, n int64) { w.WriteHeader(http.StatusServiceUnavailable) }, "status_503"},
		{"407", func(w http.ResponseWriter, n int64) { w.WriteHeader(http.StatusProxyAuthRequired) }, "status_407"},
		{"200 is not 202", func(w http.ResponseWriter, n int64) { w.WriteHeader(http.StatusOK) }, "status_200"},
		// A bare 202 is not a hookpace's acknowledgement.
		{"202 without an id", func(w http.ResponseWriter, n int64) { w.WriteHeader(http.StatusAccepted) }, "202_without_id"},
		{"429 beyond the budget", func(w http.ResponseWriter, n int64) {
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(http.StatusTooManyRequests)
		}, "429_past_budget"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tg := newTarget(t, tt.answer)
			sp := queued(t, 50)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := Run(ctx, Options{Target: tg.URL, Queue: sp, Logger: quiet()})
			if err != nil {
				t.Fatal(err)
			}
			if res.HandedOff != 0 || res.Left != 50 || res.Kept[tt.reason] != 50 {
				t.Errorf("result %+v, want all 50 kept for %q", res, tt.reason)
			}
			if u := sp.Usage(); u.Messages != 50 {
				t.Errorf("spool holds %d, want 50", u.Messages)
			}
		})
	}
}

func TestTargetDown(t *testing.T) {
	tg := newTarget(t, accept)
	addr := tg.Listener.Addr().String()
	tg.Close()
	sp := queued(t, 20)
	res, err := Run(context.Background(), Options{Target: "http://" + addr, Queue: sp, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if res.HandedOff != 0 || res.Left != 20 || res.Kept["connection_error"] != 20 {
		t.Errorf("result %+v", res)
	}
}

// A 429 is retried after its Retry-After (0 here, so no waiting).
func TestRetries429(t *testing.T) {
	tg := newTarget(t, func(w http.ResponseWriter, n int64) {
		if n%2 == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		accept(w, n)
	})
	sp := queued(t, 40)
	res, err := Run(context.Background(), Options{Target: tg.URL, Queue: sp, Concurrency: 1, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if res.HandedOff != 40 || res.Left != 0 || tg.n.Load() != 80 {
		t.Errorf("result %+v after %d requests", res, tg.n.Load())
	}
}

func TestAuthFile(t *testing.T) {
	tg := newTarget(t, accept)
	sp := queued(t, 3)
	f := filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(f, []byte("gw:pa:ss\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	auth, err := ReadAuth(f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), Options{Target: tg.URL, Auth: auth, Queue: sp, Logger: quiet()}); err != nil {
		t.Fatal(err)
	}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("gw:pa:ss"))
	for _, g := range tg.got {
		if g.auth != want {
			t.Errorf("Proxy-Authorization %q, want %q", g.auth, want)
		}
	}
	if _, err := ReadAuth(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("a missing auth file is not an error")
	}
	if err := os.WriteFile(f, []byte("no-colon\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadAuth(f); err == nil || !strings.Contains(err.Error(), "want username:password") {
		t.Errorf("credentials without a colon: %v", err)
	}
}

// When the budget runs out, what was not handed off stays.
func TestBudget(t *testing.T) {
	release, blocked := make(chan struct{}), make(chan struct{}, 2)
	tg := newTarget(t, func(w http.ResponseWriter, n int64) {
		if n > 5 {
			blocked <- struct{}{}
			<-release
		}
		accept(w, n)
	})
	defer close(release)
	sp := queued(t, 30)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Both workers wait for an answer: the budget ends now.
		<-blocked
		<-blocked
		cancel()
	}()
	res, err := Run(ctx, Options{Target: tg.URL, Queue: sp, Concurrency: 2, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if res.HandedOff != 5 || res.Left != 25 {
		t.Errorf("result %+v, want 5 handed off and 25 left", res)
	}
}
