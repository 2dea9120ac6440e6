package catchup

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookpace/hookpace/catchup/standin"
	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/inbound"
	"github.com/hookpace/hookpace/proxy"
	"github.com/hookpace/hookpace/spool"
)

// clock is the tests' one clock: the stand-ins', the door's and
// catch-up's.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// app is the spool's dedupe and the app above it: a copy is stored once
// per (host, scope, key), a repeat under another body is the spool's
// conflict; what is stored is what the app gets. The whole Ingester and
// the whole Seer.
type app struct {
	mu     sync.Mutex
	bodies map[[3]string]string
	got    []string // each delivery id stored, with its HeaderFetched
}

func (a *app) TakeInbound(r *http.Request, in proxy.Inbound) proxy.Taken {
	a.mu.Lock()
	defer a.mu.Unlock()
	b, _ := io.ReadAll(r.Body)
	id := [3]string{proxy.HostKey(r.URL), spool.DoorScope(in.Route), in.Key}
	if first, ok := a.bodies[id]; ok {
		if first != string(b) {
			return proxy.Taken{Status: http.StatusUnprocessableEntity, Header: http.Header{}}
		}
		return proxy.Taken{Status: http.StatusAccepted, Header: http.Header{proxy.HeaderDuplicate: {"true"}}}
	}
	a.bodies[id] = string(b)
	a.got = append(a.got, in.Key+" "+r.Header.Get(inbound.HeaderFetched))
	return proxy.Taken{Status: http.StatusAccepted, Header: http.Header{}, ID: "x"}
}

func (a *app) Seen(host, scope, key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.bodies[[3]string{host, scope, key}]
	return ok
}

// received is what the app got: each delivery id and how many times.
func (a *app) received() (ids map[string]int, fetched int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ids = map[string]int{}
	for _, g := range a.got {
		key, from, _ := strings.Cut(g, " ")
		ids[key]++
		if from != "" {
			fetched++
		}
	}
	return ids, fetched
}

// door is an inbound route that verifies scheme with secret, in front of
// a, served on a local listener.
func door(t *testing.T, clk *clock, a *app, route config.InboundRoute, scheme, secret string) (*inbound.Route, string) {
	t.Helper()
	v, err := inbound.NewVerifier(inbound.VerifyOptions{Scheme: scheme, Secret: []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	route.To, route.Host = "http://127.0.0.1:3000", "127.0.0.1:3000"
	rt, err := inbound.NewRoute(inbound.Options{Route: route, Verifier: v, Ingest: a, Seen: a, App: http.NotFoundHandler(),
		Metrics: noCount{}, Logger: slog.New(slog.DiscardHandler), MaxBody: 1 << 20, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rt)
	t.Cleanup(srv.Close)
	return rt, srv.URL
}

type noCount struct{}

func (noCount) InboundRejected(context.Context, string, string) {}

func writeFile(t *testing.T, name, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestGitHubRedelivers: of 20 events, 5 never reached the door and one
// reached it while GitHub gave up waiting; catch-up redelivers the 5,
// signed through the door, over 3 pages of deliveries, and the app has
// all 20 once. The next round finds nothing to do.
func TestGitHubRedelivers(t *testing.T) {
	const secret = "It's a Secret to Everybody"
	clk := &clock{t: time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)}
	a := &app{bodies: map[[3]string]string{}}
	rt, doorURL := door(t, clk, a, config.InboundRoute{Name: "github", Dedupe: config.InboundDedupe{Header: "X-GitHub-Delivery"}},
		config.VerifyGitHub, secret)
	gh := &standin.GitHub{Secret: []byte(secret), Target: doorURL + "/webhooks/github", Repo: "octo/hello", HookID: 42,
		Token: "ghp_standin", MaxPerPage: 10, Now: clk.Now}
	api := httptest.NewServer(gh.Handler())
	defer api.Close()
	// Deliveries older than the window are not read, nor redelivered.
	gh.Send("push", "", []byte(`{"old":true}`), standin.Lost)
	clk.Add(73 * time.Hour)
	var missed []string
	for i := range 20 {
		reach := standin.Reached
		switch {
		case i%4 == 1:
			reach = standin.Lost
		case i == 6:
			reach = standin.Late
		}
		guid := gh.Send("issues", "opened", fmt.Appendf(nil, `{"n":%d}`, i), reach)
		if reach == standin.Lost {
			missed = append(missed, guid)
		}
		clk.Add(time.Second)
	}
	r, err := New(Options{Route: "github", Door: rt, Logger: slog.New(slog.DiscardHandler), Now: clk.Now,
		Config: config.CatchUp{Provider: "github", Every: config.Duration(5 * time.Minute), Since: config.Duration(72 * time.Hour),
			APIURL: api.URL, Repo: "octo/hello", HookID: 42, TokenFile: writeFile(t, "token", "ghp_standin\n")}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Once(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := (Round{Listed: 20, Failed: 6, Seen: 1, Redelivered: 5}); res != want {
		t.Errorf("round 1: %+v, want %+v", res, want)
	}
	ids, _ := a.received()
	if len(ids) != 20 {
		t.Errorf("the app has %d events, want 20", len(ids))
	}
	for id, n := range ids {
		if n != 1 {
			t.Errorf("%s reached the app %d times", id, n)
		}
	}
	for _, g := range missed {
		if ids[g] != 1 {
			t.Errorf("missed %s not caught up", g)
		}
	}
	if gh.Listed != 3 {
		t.Errorf("%d pages read, want 3 (25 deliveries, 10 a page, up to the window)", gh.Listed)
	}
	res, err = r.Once(t.Context())
	if want := (Round{Listed: 25, Failed: 1, Seen: 1}); err != nil || res != want {
		t.Errorf("round 2: %+v %v, want %+v", res, err, want)
	}
}

// TestGitHubApp: an App's hook, with a JWT its key signs, which the
// stand-in verifies with the App's public key; a target that stays down
// is redelivered MaxRedeliveries times, then left, and said so.
func TestGitHubApp(t *testing.T) {
	const secret = "app-secret"
	clk := &clock{t: time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)}
	a := &app{bodies: map[[3]string]string{}}
	rt, doorURL := door(t, clk, a, config.InboundRoute{Name: "app", Dedupe: config.InboundDedupe{Header: "X-GitHub-Delivery"}},
		config.VerifyGitHub, secret)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	gh := &standin.GitHub{Secret: []byte(secret), Target: doorURL + "/", AppID: 1234, AppKey: &key.PublicKey, Now: clk.Now}
	api := httptest.NewServer(gh.Handler())
	defer api.Close()
	var logs strings.Builder
	cu := config.CatchUp{Provider: "github", Every: config.Duration(time.Minute), Since: config.Duration(24 * time.Hour),
		APIURL: api.URL, AppID: 1234, PrivateKeyFile: writeFile(t, "app.pem", string(pemKey))}
	r, err := New(Options{Route: "app", Door: rt, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Now: clk.Now, Config: cu})
	if err != nil {
		t.Fatal(err)
	}
	gh.Send("installation", "created", []byte(`{"n":1}`), standin.Reached)
	gh.SetDown(true)
	lostGUID := gh.Send("installation", "created", []byte(`{"n":2}`), standin.Reached)
	for i := range MaxRedeliveries + 2 {
		clk.Add(time.Minute)
		res, err := r.Once(t.Context())
		want := Round{Listed: 2 + min(i, MaxRedeliveries), Failed: 1, Redelivered: 1}
		if i >= MaxRedeliveries {
			want.Redelivered, want.GaveUp = 0, 1
		}
		if err != nil || res != want {
			t.Errorf("round %d: %+v %v, want %+v", i, res, err, want)
		}
	}
	if !strings.Contains(logs.String(), "catch_up gave up") || !strings.Contains(logs.String(), "delivery="+lostGUID) {
		t.Errorf("no line says catch-up gave up on %s:\n%s", lostGUID, logs.String())
	}
	gh.SetDown(false)
	if ids, _ := a.received(); len(ids) != 1 || ids[lostGUID] != 0 {
		t.Errorf("the app has %v", ids)
	}

	// A key the App does not have: 401, and the round says so.
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	cu.PrivateKeyFile = writeFile(t, "other.pem", string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(other)})))
	r, _ = New(Options{Route: "app", Door: rt, Logger: slog.New(slog.DiscardHandler), Now: clk.Now, Config: cu})
	if _, err := r.Once(t.Context()); err == nil || !strings.Contains(err.Error(), "API answered 401: Bad credentials") {
		t.Errorf("with another key: %v", err)
	}
}

// TestGitHubCredentialsNeverLogged: a token the API refuses is in no log
// line nor error; a missing token file names the field.
func TestGitHubCredentialsNeverLogged(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)}
	a := &app{bodies: map[[3]string]string{}}
	rt, doorURL := door(t, clk, a, config.InboundRoute{Name: "gh"}, config.VerifyGitHub, "s")
	gh := &standin.GitHub{Secret: []byte("s"), Target: doorURL, Org: "octo", HookID: 7, Token: "ghp_right", Now: clk.Now}
	api := httptest.NewServer(gh.Handler())
	defer api.Close()
	var logs strings.Builder
	cu := config.CatchUp{Provider: "github", Every: config.Duration(time.Minute), Since: config.Duration(time.Hour),
		APIURL: api.URL, Org: "octo", HookID: 7, TokenFile: writeFile(t, "token", "ghp_wrong_and_secret")}
	r, _ := New(Options{Route: "gh", Door: rt, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Now: clk.Now, Config: cu})
	_, err := r.Once(t.Context())
	if err == nil || strings.Contains(err.Error(), "ghp_wrong") || strings.Contains(logs.String(), "ghp_wrong") || !strings.Contains(logs.String(), "401") {
		t.Errorf("error %v\nlogs %s", err, logs.String())
	}
	cu.TokenFile = filepath.Join(t.TempDir(), "absent")
	r, _ = New(Options{Route: "gh", Door: rt, Logger: slog.New(slog.DiscardHandler), Now: clk.Now, Config: cu})
	if _, err := r.Once(t.Context()); err == nil || !strings.HasPrefix(err.Error(), "catch_up.token_file: open ") {
		t.Errorf("absent token file: %v", err)
	}
	cu.TokenFile = writeFile(t, "token", "ghp_right")
	r, _ = New(Options{Route: "gh", Door: rt, Logger: slog.New(slog.DiscardHandler), Now: clk.Now, Config: cu})
	if _, err := r.Once(t.Context()); err != nil {
		t.Errorf("the organisation's hook with the right token: %v", err)
	}
}

// TestStripeFetches: of 10 events, 3 never reached the door; catch-up
// fetches them, marked, over pages, keeps the cursor in its state file,
// and after a restart reads only what is newer; an event younger than
// Every waits for a later round.
func TestStripeFetches(t *testing.T) {
	const secret = "whsec_standin"
	clk := &clock{t: time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)}
	a := &app{bodies: map[[3]string]string{}}
	rt, doorURL := door(t, clk, a, config.InboundRoute{Name: "stripe", Dedupe: config.InboundDedupe{JSON: "id"}},
		config.VerifyStripe, secret)
	st := &standin.Stripe{Key: "sk_test_standin", Secret: secret, Target: doorURL + "/webhooks/stripe", Now: clk.Now}
	api := httptest.NewServer(st.Handler())
	defer api.Close()
	old := st.Emit("invoice.paid", map[string]any{"id": "in_old"}, true) // before the window
	clk.Add(25 * time.Hour)
	var missed []string
	for i := range 10 {
		lost := i == 2 || i == 5 || i == 9
		id := st.Emit("invoice.paid", map[string]any{"id": fmt.Sprintf("in_%d", i)}, lost)
		if lost {
			missed = append(missed, id)
		}
		clk.Add(time.Second)
	}
	clk.Add(time.Minute)
	dir := t.TempDir()
	cu := config.CatchUp{Provider: "stripe", Every: config.Duration(time.Minute), Since: config.Duration(24 * time.Hour),
		APIURL: api.URL, APIKeyFile: writeFile(t, "sk", "sk_test_standin"), Path: "/webhooks/stripe"}
	newRunner := func() *Runner {
		r, err := New(Options{Route: "stripe", Door: rt, StateDir: dir, Logger: slog.New(slog.DiscardHandler), Now: clk.Now, Config: cu})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := newRunner()
	res, err := r.Once(t.Context())
	if want := (Round{Listed: 10, Seen: 7, Fetched: 3}); err != nil || res != want {
		t.Errorf("round 1: %+v %v, want %+v", res, err, want)
	}
	ids, fetched := a.received()
	if len(ids) != 10 || fetched != 3 || ids[old] != 0 {
		t.Errorf("the app has %d events (%d fetched), want 10 (3)", len(ids), fetched)
	}
	for _, id := range missed {
		if ids[id] != 1 {
			t.Errorf("missed %s reached the app %d times", id, ids[id])
		}
	}
	if st.Listed != 1 {
		t.Errorf("%d pages, want 1", st.Listed)
	}
	b, err := os.ReadFile(stateFile(dir, "stripe").path)
	if err != nil || !strings.Contains(string(b), `"cursor":"`+st.Newest()+`"`) || strings.Contains(string(b), "sk_test") {
		t.Errorf("state file: %s %v", b, err)
	}

	// 150 more, 40 of them missed, then one just now; a restart resumes
	// from the cursor and pages forward.
	for i := range 150 {
		st.Emit("charge.succeeded", map[string]any{"id": fmt.Sprintf("ch_%d", i)}, i%4 == 0)
		clk.Add(time.Second)
	}
	clk.Add(time.Minute)
	st.Emit("charge.succeeded", map[string]any{"id": "ch_fresh"}, true)
	st.Listed = 0
	r = newRunner()
	res, err = r.Once(t.Context())
	if want := (Round{Listed: 151, Seen: 112, Fetched: 38, Later: 1}); err != nil || res != want {
		t.Errorf("after a restart: %+v %v, want %+v", res, err, want)
	}
	if st.Listed != 2 {
		t.Errorf("%d pages, want 2 (ending_before, 100 a page)", st.Listed)
	}
	clk.Add(time.Minute)
	res, err = r.Once(t.Context())
	if want := (Round{Listed: 1, Fetched: 1}); err != nil || res != want {
		t.Errorf("the fresh one, a round later: %+v %v, want %+v", res, err, want)
	}
	ids, fetched = a.received()
	if len(ids) != 161 || fetched != 42 {
		t.Errorf("the app has %d events (%d fetched), want 161 (42)", len(ids), fetched)
	}
	for id, n := range ids {
		if n != 1 {
			t.Errorf("%s reached the app %d times", id, n)
		}
	}
}

// TestEvery: a round at start, then one each time Every has passed on
// the clock, and none after the context ends; a cursor whose event
// Stripe no longer has starts again from Since.
func TestEvery(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)}
	a := &app{bodies: map[[3]string]string{}}
	rt, doorURL := door(t, clk, a, config.InboundRoute{Name: "s", Dedupe: config.InboundDedupe{JSON: "id"}}, config.VerifyStripe, "whsec_x")
	st := &standin.Stripe{Key: "sk", Secret: "whsec_x", Target: doorURL, Now: clk.Now}
	api := httptest.NewServer(st.Handler())
	defer api.Close()
	ticks := make(chan chan time.Time)
	after := func(d time.Duration) <-chan time.Time {
		if d != 7*time.Minute {
			t.Errorf("waits %s, want every's 7m", d)
		}
		c := make(chan time.Time)
		ticks <- c
		return c
	}
	dir := t.TempDir()
	r, err := New(Options{Route: "s", Door: rt, StateDir: dir, Logger: slog.New(slog.DiscardHandler), Now: clk.Now, After: after,
		Config: config.CatchUp{Provider: "stripe", Every: config.Duration(7 * time.Minute), Since: config.Duration(time.Hour),
			APIURL: api.URL, APIKeyFile: writeFile(t, "sk", "sk"), Path: "/"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		r.Run(ctx)
		close(done)
	}()
	c := <-ticks
	if st.Listed != 1 {
		t.Errorf("%d rounds at start, want 1", st.Listed)
	}
	for i := 2; i <= 4; i++ {
		st.Emit("x", map[string]any{}, true)
		clk.Add(7 * time.Minute)
		c <- clk.Now()
		c = <-ticks
		if ids, _ := a.received(); st.Listed != i || len(ids) != i-1 {
			t.Errorf("after %d periods: %d rounds, the app has %d, want %d and %d", i-1, st.Listed, len(ids), i, i-1)
		}
	}
	cancel()
	<-done
	if st.Listed != 4 {
		t.Errorf("%d rounds, want 4", st.Listed)
	}

	// The cursor's event is past Stripe's 30 days: the next round reads
	// the window again.
	clk.Add(31 * 24 * time.Hour)
	st.Emit("y", map[string]any{}, true)
	clk.Add(7 * time.Minute)
	r.opts.After = time.After
	res, err := r.Once(t.Context())
	if want := (Round{Listed: 1, Fetched: 1}); err != nil || res != want {
		t.Errorf("after the cursor's event is gone: %+v %v, want %+v", res, err, want)
	}
}
