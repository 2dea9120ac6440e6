package proxy

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/egress"
	"github.com/hookpace/hookpace/handoff"
	"github.com/hookpace/hookpace/spool"
)

const laneHost = "127.0.0.1:9"

// laneProxy is a proxy on a real spool in a temporary directory whose
// every host has policy hp, logging to log (nil: nowhere).
func laneProxy(t *testing.T, hp HostPolicy, users []User, log *bytes.Buffer) (*Proxy, *spool.Spool) {
	t.Helper()
	sp, err := openJournaled(spool.Options{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	g, err := egress.New(egress.Options{Allow: []string{"127.0.0.0/8"}})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	if log != nil {
		logger = slog.New(slog.NewTextHandler(log, nil))
	}
	pol := Policy{Host: func(string) HostPolicy { return hp }, MaxBody: 1 << 20, Users: users, Methods: []string{"POST"}}
	return New(Options{Policy: pol, Spool: sp, Guard: g, Transport: &http.Transport{}, Logger: logger}), sp
}

// post sends one webhook to path at laneHost through p with headers h.
func post(p *Proxy, path string, h http.Header) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "http://"+laneHost+path, strings.NewReader(`{"n":1}`))
	for k, vs := range h {
		r.Header[k] = vs
	}
	w := httptest.NewRecorder()
	p.ServeHTTP(w, r)
	return w
}

// queued is what the spool holds for laneHost.
func queued(t *testing.T, sp *spool.Spool) []*spool.Message {
	t.Helper()
	ms, err := sp.Queued(laneHost, 100)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

var laneHeaders = []string{HeaderFairnessKey, HeaderOrderingKey, HeaderPriority, HeaderDelay, HeaderNotBefore}

// Each lane header lands in its field of the stored webhook, and none of
// them is among the headers the partner will get.
func TestLaneHeadersAreReadAndStripped(t *testing.T) {
	p, sp := laneProxy(t, HostPolicy{FairnessKey: FairnessHeader, MaxAge: time.Hour}, nil, nil)
	due := time.Now().Add(30 * time.Minute).UTC().Truncate(time.Second)
	for _, h := range []http.Header{
		{HeaderFairnessKey: {"tenant-a"}, HeaderPriority: {"low"}, HeaderDelay: {"30s"}, "X-Event": {"a"}},
		{HeaderOrderingKey: {"order-42"}, HeaderNotBefore: {due.Format(http.TimeFormat)}, "X-Event": {"b"}},
		{HeaderPriority: {"high"}, HeaderDelay: {"90"}, "X-Event": {"c"}},
		{HeaderDelay: {"0s"}, "X-Event": {"d"}},
		{HeaderNotBefore: {"Sun, 06 Nov 1994 08:49:37 GMT"}, "X-Event": {"e"}}, // past: at once
	} {
		if w := post(p, "/hook", h); w.Code != http.StatusAccepted {
			t.Fatalf("%v: %d %s", h, w.Code, w.Body)
		}
	}
	got := map[string]*spool.Message{}
	for _, m := range queued(t, sp) {
		got[m.Header.Get("X-Event")] = m
		for _, name := range laneHeaders {
			if _, ok := m.Header[name]; ok {
				t.Errorf("webhook %s stored %s, which the partner would get", m.Header.Get("X-Event"), name)
			}
		}
	}
	if len(got) != 5 {
		t.Fatalf("stored %d webhooks, want 5", len(got))
	}
	for _, c := range []struct {
		ev, fairness, ordering string
		prio                   spool.Priority
		delay                  time.Duration // NotBefore - Enqueued; -1: zero NotBefore
	}{
		{"a", "tenant-a", "", spool.PriorityLow, 30 * time.Second},
		{"c", "", "", spool.PriorityHigh, 90 * time.Second},
		{"d", "", "", spool.PriorityNormal, -1},
		{"e", "", "", spool.PriorityNormal, -1},
	} {
		m := got[c.ev]
		if m.Fairness != c.fairness || m.Ordering != c.ordering || m.Priority != c.prio {
			t.Errorf("%s: fairness %q ordering %q priority %s; want %q %q %s", c.ev, m.Fairness, m.Ordering, m.Priority,
				c.fairness, c.ordering, c.prio)
		}
		if c.delay < 0 && !m.NotBefore.IsZero() || c.delay >= 0 && m.NotBefore.Sub(m.Enqueued) != c.delay {
			t.Errorf("%s: not before %v, enqueued %v; want %v later", c.ev, m.NotBefore, m.Enqueued, c.delay)
		}
	}
	if m := got["b"]; m.Ordering != "order-42" || !m.NotBefore.Equal(due) {
		t.Errorf("b: ordering %q, not before %v; want order-42, %v", m.Ordering, m.NotBefore, due)
	}
}

// A lane header that cannot be honoured is a 400 that says why, and
// nothing is stored.
func TestLaneHeadersRefused(t *testing.T) {
	p, sp := laneProxy(t, HostPolicy{FairnessKey: FairnessHeader, MaxAge: time.Hour}, nil, nil)
	late := time.Now().Add(2 * time.Hour).UTC().Format(http.TimeFormat)
	for _, c := range []struct {
		h    http.Header
		want string
	}{
		{http.Header{HeaderPriority: {"urgent"}}, "Hookpace-Priority must be given once, as high, normal or low"},
		{http.Header{HeaderPriority: {""}}, "Hookpace-Priority must be given once"},
		{http.Header{HeaderPriority: {"high", "low"}}, "Hookpace-Priority must be given once"},
		{http.Header{HeaderDelay: {"-5s"}}, "Hookpace-Delay must be a duration"},
		{http.Header{HeaderDelay: {"-5"}}, "Hookpace-Delay must be a duration"},
		{http.Header{HeaderDelay: {"soon"}}, "Hookpace-Delay must be a duration"},
		{http.Header{HeaderDelay: {"2h"}}, "Hookpace-Delay beyond max_age (1h0m0s)"},
		{http.Header{HeaderDelay: {"7201"}}, "Hookpace-Delay beyond max_age"},
		{http.Header{HeaderDelay: {"1e300"}}, "Hookpace-Delay must be a duration"},
		{http.Header{HeaderNotBefore: {late}}, "Hookpace-Not-Before beyond max_age"},
		{http.Header{HeaderNotBefore: {"tomorrow"}}, "Hookpace-Not-Before must be an HTTP-date"},
		{http.Header{HeaderDelay: {"5s"}, HeaderNotBefore: {late}}, "give one of Hookpace-Delay and Hookpace-Not-Before, once"},
		{http.Header{HeaderDelay: {"5s", "6s"}}, "give one of"},
		{http.Header{HeaderFairnessKey: {"a\x01b"}}, "Hookpace-Fairness-Key has a control character (byte 1): want 1 to 200 bytes of printable UTF-8"},
		{http.Header{HeaderDelay: {"9223372036.854775807"}}, "Hookpace-Delay must be a duration"},
		{http.Header{HeaderDelay: {"9223372036"}}, "Hookpace-Delay beyond max_age"},
		{http.Header{HeaderOrderingKey: {"ord\xe9r"}}, "Hookpace-Ordering-Key is not UTF-8 (byte 3)"},
		{http.Header{HeaderOrderingKey: {"a\u202eb"}}, "Hookpace-Ordering-Key has a bidirectional override or isolate, U+202E"},
		{http.Header{HeaderFairnessKey: {"a\u2067b"}}, "Hookpace-Fairness-Key has a bidirectional override or isolate, U+2067"},
		{http.Header{HeaderOrderingKey: {"a\u0085b"}}, "Hookpace-Ordering-Key has a control character"},
		{http.Header{HeaderFairnessKey: {strings.Repeat("k", 201)}}, "Hookpace-Fairness-Key is 201 bytes, more than 200"},
		{http.Header{HeaderFairnessKey: {""}}, "Hookpace-Fairness-Key is empty"},
		{http.Header{HeaderFairnessKey: {"a", "b"}}, "Hookpace-Fairness-Key given more than once"},
		{http.Header{HeaderOrderingKey: {"o\nk"}}, "Hookpace-Ordering-Key has a control character"},
		{http.Header{HeaderOrderingKey: {""}}, "Hookpace-Ordering-Key is empty"},
		{http.Header{HeaderOrderingKey: {"a", "b"}}, "Hookpace-Ordering-Key given more than once"},
	} {
		w := post(p, "/hook", c.h)
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), c.want) {
			t.Errorf("%q: %d %q; want 400 saying %q", c.h, w.Code, w.Body, c.want)
		}
	}
	if ms := queued(t, sp); len(ms) != 0 {
		t.Errorf("%d refused webhooks were stored", len(ms))
	}
}

// Where the fairness key comes from, by fairness.key; the header is
// stripped in every mode, and honoured in header mode only.
func TestFairnessKeyModes(t *testing.T) {
	users := []User{{Username: "tenant-a", Password: "pw-a"}}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("tenant-a:pw-a"))
	for _, c := range []struct {
		name  string
		mode  FairnessFrom
		path  string
		depth int
		users []User
		want  string
	}{
		{"header", FairnessHeader, "/webhooks/cust-42/x", 1, nil, "spoof"},
		{"none", FairnessNone, "/webhooks/cust-42/x", 1, nil, ""},
		{"proxy user", FairnessProxyUser, "/webhooks/cust-42/x", 1, users, "tenant-a"},
		{"proxy user without auth", FairnessProxyUser, "/webhooks/cust-42/x", 1, nil, ""},
		{"path depth 1", FairnessPath, "/webhooks/cust-42/x", 1, nil, "/webhooks"},
		{"path depth 2", FairnessPath, "/webhooks/cust-42/x", 2, nil, "/webhooks/cust-42"},
		{"path shorter than depth", FairnessPath, "/webhooks/", 3, nil, "/webhooks/"},
		{"root path", FairnessPath, "/", 1, nil, "/"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, sp := laneProxy(t, HostPolicy{FairnessKey: c.mode, PathDepth: c.depth}, c.users, nil)
			h := http.Header{HeaderFairnessKey: {"spoof"}, "Proxy-Authorization": {basic}}
			if w := post(p, c.path, h); w.Code != http.StatusAccepted {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			ms := queued(t, sp)
			if len(ms) != 1 {
				t.Fatalf("stored %d, want 1", len(ms))
			}
			if ms[0].Fairness != c.want || ms[0].Header.Get(HeaderFairnessKey) != "" {
				t.Fatalf("fairness %q, header %q; want key %q, no header", ms[0].Fairness, ms[0].Header.Get(HeaderFairnessKey), c.want)
			}
		})
	}
}

// Inside a CONNECT tunnel, the proxy user is the one the CONNECT
// authenticated as. (connect: deny, so that the tunnel waits for its first
// bytes as long as it may: plain HTTP inside is still spooled.)
func TestFairnessKeyProxyUserInTunnel(t *testing.T) {
	users := []User{{Username: "tenant-b", Password: "pw-b"}}
	p, sp := laneProxy(t, HostPolicy{FairnessKey: FairnessProxyUser, Connect: ConnectDeny}, users, nil)
	srv := httptest.NewServer(p)
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	basic := base64.StdEncoding.EncodeToString([]byte("tenant-b:pw-b"))
	for _, step := range []struct {
		send string
		want int
	}{
		{"CONNECT " + laneHost + " HTTP/1.1\r\nHost: " + laneHost + "\r\nProxy-Authorization: Basic " + basic + "\r\n\r\n", http.StatusOK},
		{"POST /hook HTTP/1.1\r\nHost: " + laneHost + "\r\nContent-Length: 2\r\n" + HeaderFairnessKey + ": spoof\r\n\r\n{}", http.StatusAccepted},
	} {
		if _, err := io.WriteString(c, step.send); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, &http.Request{Method: strings.Fields(step.send)[0]})
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != step.want {
			t.Fatalf("%s: status %d, want %d", strings.Fields(step.send)[0], resp.StatusCode, step.want)
		}
		if step.want == http.StatusAccepted {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	if ms := queued(t, sp); len(ms) != 1 || ms[0].Fairness != "tenant-b" {
		t.Fatalf("stored %d, want one with fairness key tenant-b", len(ms))
	}
}

// A fairness key at max_queued_per_key gets 429 with a Retry-After from
// its share of the host's rate, counted and logged as its own outcome;
// other keys are still accepted.
func TestMaxQueuedPerKey(t *testing.T) {
	var log bytes.Buffer
	p, sp := laneProxy(t, HostPolicy{FairnessKey: FairnessHeader, MaxQueuedPerKey: 3, Rate: 2}, nil, &log)
	key := func(k string) http.Header { return http.Header{HeaderFairnessKey: {k}} }
	for range 3 {
		if w := post(p, "/hook", key("A")); w.Code != http.StatusAccepted {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	}
	// 3 queued for A, the only key: it drains at 2/s, 2 s.
	w := post(p, "/hook", key("A"))
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "2" ||
		!strings.Contains(w.Body.String(), `queue full for fairness key "A"`) {
		t.Fatalf("4th for A: %d, Retry-After %q, %q; want 429, 2, queue full", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	if w := post(p, "/hook", key("B")); w.Code != http.StatusAccepted {
		t.Fatalf("B: %d %s", w.Code, w.Body)
	}
	if w := post(p, "/hook", nil); w.Code != http.StatusAccepted {
		t.Fatalf("no key: %d %s", w.Code, w.Body)
	}
	// Three keys with work now (A, B and none): A's share is 2/3 per s, 4.5 s.
	if w := post(p, "/hook", key("A")); w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "5" {
		t.Fatalf("A again: %d, Retry-After %q; want 429, 5", w.Code, w.Header().Get("Retry-After"))
	}
	if n := p.Counts()["rejected_key_full"]; n != 2 {
		t.Errorf("counted %d rejected_key_full, want 2", n)
	}
	if !strings.Contains(log.String(), "decision=rejected_key_full status=429") {
		t.Errorf("no ingest line for the 429:\n%s", log.String())
	}
	if ms := queued(t, sp); len(ms) != 5 {
		t.Errorf("stored %d, want 5", len(ms))
	}
}

// The Retry-After of a key at its cap is held within the proxy's bounds.
func TestKeyRetryAfterBounds(t *testing.T) {
	for _, c := range []struct {
		rate float64
		want string
	}{{0.001, "300"}, {1000, "1"}, {0, "30"}} {
		p, _ := laneProxy(t, HostPolicy{FairnessKey: FairnessHeader, MaxQueuedPerKey: 1, Rate: c.rate}, nil, nil)
		post(p, "/hook", http.Header{HeaderFairnessKey: {"A"}})
		w := post(p, "/hook", http.Header{HeaderFairnessKey: {"A"}})
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != c.want {
			t.Errorf("rate %g: %d, Retry-After %q; want 429, %s", c.rate, w.Code, w.Header().Get("Retry-After"), c.want)
		}
	}
}

// Admitting a webhook without lane headers allocates nothing, with
// fairness by header (and a cap per key) or without.
func TestAdmitLaneAllocatesNothing(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "http://"+laneHost+"/hook", nil)
	r.Header.Set("Content-Type", "application/json")
	now := time.Now()
	for _, hp := range []HostPolicy{{MaxAge: time.Hour}, {FairnessKey: FairnessHeader, MaxQueuedPerKey: 10, Rate: 1}} {
		p, _ := laneProxy(t, hp, nil, nil)
		n := testing.AllocsPerRun(100, func() {
			if _, bad := p.admitLane(r, &hp, laneHost, "", now); bad != nil {
				t.Fatal(bad.reason)
			}
		})
		if n != 0 {
			t.Errorf("%+v: %v allocations, want 0", hp, n)
		}
	}
}

func TestPathKey(t *testing.T) {
	for _, c := range []struct {
		path  string
		depth int
		want  string
	}{
		{"/webhooks/cust-42/x", 1, "/webhooks"},
		{"/webhooks/cust-42/x", 2, "/webhooks/cust-42"},
		{"/webhooks/cust-42/x", 3, "/webhooks/cust-42/x"},
		{"/webhooks/cust-42/x", 9, "/webhooks/cust-42/x"},
		{"/a//b", 2, "/a/"},
		{"", 1, "/"},
	} {
		if got := pathKey(c.path, c.depth); got != c.want {
			t.Errorf("pathKey(%q, %d) = %q, want %q", c.path, c.depth, got, c.want)
		}
	}
}

// A hand-off whose claim checks keeps the fairness key its first hookpace
// found (Hookpace-Fairness-Key), though this host takes keys from the
// proxy user; an unchecked claim does not.
func TestHandoffKeepsFairnessKey(t *testing.T) {
	users := []User{{Username: "peer", Password: "pw"}}
	p, sp := laneProxy(t, HostPolicy{FairnessKey: FairnessProxyUser}, users, nil)
	secret := []byte("0123456789abcdef0123456789abcdef")
	pol := *p.policy.Load()
	pol.HandoffSecret = secret
	p.SetPolicy(pol)
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("peer:pw"))
	for i, sig := range []string{
		handoff.Sign(secret, "pod-a/00000000000000070000000000000001", http.MethodPost, laneHost, []byte(`{"n":1}`)),
		"", // unsigned: refused, nothing stored
	} {
		claim := "pod-a/0000000000000007000000000000000" + strconv.Itoa(i+1)
		h := http.Header{"Proxy-Authorization": {basic}, handoff.Header: {claim}, HeaderFairnessKey: {"tenant-x"}}
		if sig != "" {
			h[handoff.SignatureHeader] = []string{sig}
		}
		w := post(p, "/hook", h)
		if want := []int{http.StatusAccepted, http.StatusForbidden}[i]; w.Code != want {
			t.Fatalf("hand-off %d: %d %s, want %d", i, w.Code, w.Body, want)
		}
	}
	// Not a hand-off: the header does not choose the key.
	if w := post(p, "/hook", http.Header{"Proxy-Authorization": {basic}, HeaderFairnessKey: {"tenant-x"}}); w.Code != http.StatusAccepted {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	keys := map[string]int{}
	for _, m := range queued(t, sp) {
		keys[m.Fairness]++
	}
	if len(keys) != 2 || keys["tenant-x"] != 1 || keys["peer"] != 1 {
		t.Errorf("fairness keys stored %v, want tenant-x (the hand-off) and peer", keys)
	}
}
