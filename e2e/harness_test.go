// Package e2e tests the real hookpace binary from the outside: it builds
// ./cmd/hookpace, starts it on loopback with a temporary config, sends
// webhooks through it with real proxy clients, and watches what arrives at
// real httptest receivers.
package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/hookpace/hookpace/cli"
	"github.com/hookpace/hookpace/internal/proctest"
)

// productMain keeps the product's code linked into the test binary. The
// tests run a binary that TestMain builds from ../cmd/hookpace, which go
// test's cache can't see; this way a change to the product changes the
// test binary, and a cached e2e result no longer counts.
var productMain = cli.Main

var binary string // built once in TestMain

func TestMain(m *testing.M) {
	if productMain == nil {
		panic("e2e: cli.Main is not linked in")
	}
	dir, err := os.MkdirTemp("", "hookpace-e2e")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "hookpace")
	build := proctest.Command("go", "build", "-o", binary, "../cmd/hookpace")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building hookpace:", err)
		os.Exit(1)
	}
	parallelTests()
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// slack multiplies the limit of every WaitFor and Poll. A limit says
// when a condition that should come has hung, not how fast it comes: the
// tests run eight at a time, on machines that may be busy with other
// work, and a wait that ends early costs nothing.
const slack = 3

// e2eParallel is how many e2e tests run at once unless -parallel says
// otherwise. They spend their time waiting on paced deliveries, restarts
// and timers, not on the CPU, so more of them than cores fit: each has its
// own ports, spool, processes and (where it needs them) namespaces.
const e2eParallel = 8

// Fleet bounds: the tests that check a fleet's shared limits to the
// request (the busiest second within burst + rate, never more in flight
// than the cap) time arrivals by the kernel's receive time of each
// request's bytes at the partner's socket (SO_TIMESTAMPNS), so the
// partner's own scheduling does not move them, and run beside a busy node
// (busyNode: six CPU-bound processes and two writers syncing every block)
// as a fleet on a loaded machine does. They do not call t.Parallel: the
// load is theirs, not the other tests'.

// parallelTests raises -test.parallel (GOMAXPROCS by default) to
// e2eParallel, unless the command line set it.
func parallelTests() {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", strconv.Itoa(e2eParallel))
	}
}

// Hookpace is one running hookpace process.
type Hookpace struct {
	t       *testing.T
	Dir     string // spool dir and config live here
	Config  string // config path
	Proxy   string // "127.0.0.1:port"
	Admin   string
	cmd     *exec.Cmd
	logMu   sync.Mutex
	log     bytes.Buffer
	exited  chan struct{}
	exitErr error
	// hosts, if set, is an /etc/hosts that hookpace alone sees (a mount
	// namespace of its own), so that it resolves partner names to
	// loopback and clients need no NO_PROXY exemption for them.
	hosts string
	// env is added to hookpace's environment (KEY=VALUE), after the
	// test binary's own: tests run in parallel, so none sets a variable
	// in the shared environment for its hookpace to inherit.
	env []string
	// prefix, if set, is a command hookpace is started under, which
	// execs it (ip netns exec NAME: capture_test.go).
	prefix []string
}

// deadPort returns a loopback address where nothing listens (a port the
// kernel handed out and that was closed again): a target that refuses.
func deadPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Start writes cfg (YAML, without listen/admin/spool.dir, which Start
// fills in) to a temp dir and starts hookpace on it. hookpace binds both
// listeners on 127.0.0.1:0 and the harness reads the bound addresses
// from its "hookpace started" line, so no two tests race for a port. The
// process is killed at the end of the test.
func Start(t *testing.T, cfg string) *Hookpace {
	t.Helper()
	return StartEnv(t, nil, cfg)
}

// StartEnv is Start with env (KEY=VALUE) added to hookpace's environment.
func StartEnv(t *testing.T, env []string, cfg string) *Hookpace {
	t.Helper()
	h := &Hookpace{t: t, Dir: t.TempDir(), env: env}
	h.Config = filepath.Join(h.Dir, "hookpace.yaml")
	writeConfig(t, h.Config, "127.0.0.1:0", "127.0.0.1:0", filepath.Join(h.Dir, "spool"), cfg)
	h.start()
	t.Cleanup(func() { h.Kill() })
	return h
}

// writeConfig merges hookpace's listeners and spool dir into the test's
// YAML (which may have its own spool: block, in either style).
func writeConfig(t *testing.T, path, listen, admin, spoolDir, cfg string) {
	t.Helper()
	doc := map[string]any{}
	if err := yaml.Unmarshal([]byte(cfg), &doc); err != nil {
		t.Fatalf("test config: %v\n%s", err, cfg)
	}
	if doc == nil {
		doc = map[string]any{}
	}
	doc["listen"] = listen
	if m, ok := doc["admin"].(map[string]any); ok { // admin: {token_file: ...}
		m["listen"] = admin
	} else {
		doc["admin"] = admin
	}
	sp, _ := doc["spool"].(map[string]any)
	if sp == nil {
		sp = map[string]any{}
	}
	sp["dir"] = spoolDir
	doc["spool"] = sp
	b, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// unshareMount is unshare's flags for a mount namespace of hookpace's own:
// as root, -m alone; as anyone else, -r -m, a user namespace (where the
// kernel allows unprivileged ones) in which the caller is root of its own
// mount namespace and may bind-mount over /etc/hosts.
func unshareMount() []string {
	if os.Geteuid() == 0 {
		return []string{"-m"}
	}
	return []string{"-r", "-m"}
}

// StartResolving is Start with names resolved to 127.0.0.1 for hookpace
// alone: it runs in a mount namespace of its own (unshareMount) over an
// /etc/hosts that adds them. A client given such a name sends it through the proxy like any partner's, where Go, Java and
// others would send a loopback address around it.
func StartResolving(t *testing.T, cfg string, names ...string) *Hookpace {
	t.Helper()
	h := &Hookpace{t: t, Dir: t.TempDir()}
	h.Config = filepath.Join(h.Dir, "hookpace.yaml")
	writeConfig(t, h.Config, "127.0.0.1:0", "127.0.0.1:0", filepath.Join(h.Dir, "spool"), cfg)
	system, err := os.ReadFile("/etc/hosts")
	if err != nil {
		t.Fatal(err)
	}
	h.hosts = filepath.Join(h.Dir, "hosts")
	extra := "\n127.0.0.1 " + strings.Join(names, " ") + "\n"
	if err := os.WriteFile(h.hosts, append(system, extra...), 0o644); err != nil {
		t.Fatal(err)
	}
	h.start()
	t.Cleanup(func() { h.Kill() })
	return h
}

func (h *Hookpace) start() {
	h.t.Helper()
	h.cmd = exec.Command(binary, "run", "--config", h.Config)
	if len(h.prefix) > 0 {
		h.cmd = exec.Command(h.prefix[0], append(h.prefix[1:], binary, "run", "--config", h.Config)...)
	}
	if h.hosts != "" {
		// exec: the process the harness signals is hookpace itself.
		h.cmd = exec.Command("unshare", append(unshareMount(), "sh", "-c", `mount --bind "$0" /etc/hosts && exec "$1" run --config "$2"`,
			h.hosts, binary, h.Config)...)
	}
	dieWithTest(h.cmd)
	// hookpace must ignore proxy variables in its own environment: point
	// them at a dead port to prove it.
	h.cmd.Env = append(os.Environ(), "HTTP_PROXY=http://127.0.0.1:1", "HTTPS_PROXY=http://127.0.0.1:1",
		"http_proxy=http://127.0.0.1:1", "https_proxy=http://127.0.0.1:1", "NO_PROXY=", "no_proxy=")
	h.cmd.Env = append(h.cmd.Env, h.env...)
	pr, pw := io.Pipe()
	h.cmd.Stdout, h.cmd.Stderr = pw, pw
	h.exited = make(chan struct{})
	if err := h.cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	ready := make(chan [2]string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			h.logMu.Lock()
			h.log.WriteString(line + "\n")
			h.logMu.Unlock()
			if strings.Contains(line, "hookpace started") {
				once.Do(func() { ready <- startedAddrs(line) })
			}
		}
	}()
	go func() {
		h.exitErr = h.cmd.Wait()
		pw.Close()
		<-scanned // the last lines are in h.log before anyone hears of the exit
		close(h.exited)
	}()
	select {
	case addrs := <-ready:
		if addrs[0] == "" || addrs[1] == "" {
			h.t.Fatalf("no listen/admin address in the start line\n%s", h.Log())
		}
		h.Proxy, h.Admin = addrs[0], addrs[1]
	case <-h.exited:
		h.t.Fatalf("hookpace exited at start: %v\n%s", h.exitErr, h.Log())
	case <-time.After(30 * time.Second):
		h.t.Fatalf("hookpace did not start within 30s\n%s", h.Log())
	}
}

var startedText = regexp.MustCompile(`\b(listen|admin)=(\S+)`)

// startedAddrs reads the bound proxy and admin addresses from hookpace's
// "hookpace started" line, in either log format (JSON or text).
func startedAddrs(line string) [2]string {
	var j struct{ Listen, Admin string }
	if json.Unmarshal([]byte(line), &j) == nil {
		return [2]string{j.Listen, j.Admin}
	}
	var out [2]string
	for _, m := range startedText.FindAllStringSubmatch(line, -1) {
		if m[1] == "listen" {
			out[0] = m[2]
		} else {
			out[1] = m[2]
		}
	}
	return out
}

// dieWithTest makes cmd, not started yet, die with the test process
// (proctest.DieWithParent): a test killed while it hangs leaves no
// hookpace, receiver or tool running. Its starter still kills it and
// waits for it at the test's end.
func dieWithTest(cmd *exec.Cmd) { proctest.DieWithParent(cmd) }

// Log returns everything hookpace has logged so far.
func (h *Hookpace) Log() string {
	h.logMu.Lock()
	defer h.logMu.Unlock()
	return h.log.String()
}

// Kill sends SIGKILL and waits for the process to go.
func (h *Hookpace) Kill() {
	if h.cmd == nil || h.cmd.Process == nil {
		return
	}
	select {
	case <-h.exited:
		return
	default:
	}
	h.cmd.Process.Kill()
	<-h.exited
}

// Signal sends sig to hookpace.
func (h *Hookpace) Signal(sig syscall.Signal) { h.cmd.Process.Signal(sig) }

// Wait waits for hookpace to exit and returns its exit code.
func (h *Hookpace) Wait(limit time.Duration) int {
	h.t.Helper()
	select {
	case <-h.exited:
	case <-time.After(limit):
		h.t.Fatalf("hookpace still running after %v\n%s", limit, h.Log())
	}
	if h.cmd.ProcessState == nil {
		return -1
	}
	return h.cmd.ProcessState.ExitCode()
}

// Restart starts hookpace again on the same config and spool (after Kill
// or a graceful exit). Its listeners get new ports: Proxy and Admin are
// updated, so take clients and addresses after the restart.
func (h *Hookpace) Restart() {
	h.t.Helper()
	h.logMu.Lock()
	h.log.Reset()
	h.logMu.Unlock()
	h.start()
}

// Client returns an HTTP client that sends everything through hookpace,
// including loopback targets (ProxyFromEnvironment would skip those).
func (h *Hookpace) Client() *http.Client {
	u, _ := url.Parse("http://" + h.Proxy)
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u), MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}
}

// Post sends one webhook through hookpace and returns the status and id.
func (h *Hookpace) Post(c *http.Client, target string, body []byte, hdr http.Header) (int, string) {
	h.t.Helper()
	status, header, _ := PostRaw(h.t, c, target, body, hdr)
	return status, header.Get("X-Hookpace-Id")
}

// PostRaw POSTs body to target with c, with the headers hdr, and returns
// the answer's status, headers and body.
func PostRaw(t *testing.T, c *http.Client, target string, body []byte, hdr http.Header) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// AdminJSON GETs an admin path and decodes the JSON answer into v.
func (h *Hookpace) AdminJSON(path string, v any) {
	h.t.Helper()
	resp, err := http.Get("http://" + h.Admin + path)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		h.t.Fatalf("GET %s: %v", path, err)
	}
}

// Metrics scrapes /metrics and returns the text.
func (h *Hookpace) Metrics() string {
	h.t.Helper()
	resp, err := http.Get("http://" + h.Admin + "/metrics")
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// CLI runs a hookpace subcommand against this instance's admin API.
func (h *Hookpace) CLI(args ...string) (string, error) {
	out, err := proctest.Command(binary, append(args, "--admin", h.Admin)...).CombinedOutput()
	return string(out), err
}

// Receiver is a real HTTP partner that records what it gets.
type Receiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []Arrival
	notify chan struct{}
	// Handle, if set, decides the answer; n counts requests from 1.
	Handle func(w http.ResponseWriter, r *http.Request, n int)
}

// Arrival is one request a Receiver got.
type Arrival struct {
	At     time.Time
	Method string
	Path   string
	Header http.Header
	Body   []byte
	Status int  // what the receiver answered; 0 while its handler runs
	TLS    bool // it came over TLS
}

// NewReceiver starts a receiver on loopback.
func NewReceiver(t *testing.T) *Receiver {
	rc := &Receiver{notify: make(chan struct{}, 1)}
	rc.Server = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.Close)
	return rc
}

// NewTLSReceiver starts a receiver with a self-signed certificate.
func NewTLSReceiver(t *testing.T) *Receiver {
	rc := &Receiver{notify: make(chan struct{}, 1)}
	rc.Server = httptest.NewTLSServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *Receiver) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now() // when the request arrived, before reading its body
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	n := len(rc.got) + 1
	// Status 0 until the handler has answered: a test that waits for
	// answers of one status must not see this request's before it is set.
	a := Arrival{At: at, Method: r.Method, Path: r.URL.RequestURI(), Header: r.Header.Clone(), Body: body, TLS: r.TLS != nil}
	rc.got = append(rc.got, a)
	idx := len(rc.got) - 1
	h := rc.Handle
	rc.mu.Unlock()
	sw := &statusWriter{ResponseWriter: w, status: 200}
	if h != nil {
		h(sw, r, n)
	} else {
		w.WriteHeader(200)
	}
	rc.mu.Lock()
	rc.got[idx].Status = sw.status
	rc.mu.Unlock()
	select {
	case rc.notify <- struct{}{}:
	default:
	}
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) { s.status = code; s.ResponseWriter.WriteHeader(code) }

// Host is the receiver's host:port, as hookpace keys it.
func (rc *Receiver) Host() string {
	return strings.TrimPrefix(strings.TrimPrefix(rc.URL, "http://"), "https://")
}

// Arrivals returns a copy of what arrived so far.
func (rc *Receiver) Arrivals() []Arrival {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Arrival(nil), rc.got...)
}

// Count returns how many requests arrived that pass keep (nil: all).
func (rc *Receiver) Count(keep func(Arrival) bool) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := 0
	for _, a := range rc.got {
		if keep == nil || keep(a) {
			n++
		}
	}
	return n
}

// WaitFor blocks until cond holds for the arrivals, or fails the test
// after slack times limit. It wakes on every arrival (no polling sleeps).
func (rc *Receiver) WaitFor(t *testing.T, limit time.Duration, what string, cond func([]Arrival) bool) {
	t.Helper()
	limit *= slack
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		if cond(rc.Arrivals()) {
			return
		}
		select {
		case <-rc.notify:
		case <-deadline.C:
			t.Fatalf("after %v: %s not reached (%d arrivals)", limit, what, len(rc.Arrivals()))
		}
	}
}

// Delivered2xx counts arrivals answered 2xx.
func Delivered2xx(as []Arrival) int {
	n := 0
	for _, a := range as {
		if a.Status >= 200 && a.Status < 300 {
			n++
		}
	}
	return n
}

// WebhookBody is the body of webhook i in the tests: small, distinct,
// and checkable byte for byte at the receiver.
func WebhookBody(i int) []byte {
	return []byte(fmt.Sprintf(`{"event":%d,"pad":"%s"}`, i, strings.Repeat("x", 64)))
}

// PostAll sends n webhooks (body WebhookBody(i)) through hp, at most parallel at
// a time, fails the test unless every one is acknowledged with 202, and
// returns their request paths.
func PostAll(t *testing.T, hp *Hookpace, n, parallel int, target func(i int) string) map[string]bool {
	t.Helper()
	c := hp.Client()
	defer c.CloseIdleConnections()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		fails []string
	)
	sem := make(chan struct{}, parallel)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			resp, err := c.Post(target(i), "application/json", bytes.NewReader(WebhookBody(i)))
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusAccepted && resp.Header.Get("X-Hookpace-Id") != "" {
					return
				}
				err = fmt.Errorf("status %d, id %q", resp.StatusCode, resp.Header.Get("X-Hookpace-Id"))
			}
			mu.Lock()
			fails = append(fails, fmt.Sprintf("webhook %d: %v", i, err))
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(fails) > 0 {
		t.Fatalf("%d of %d webhooks not acknowledged, first: %s", len(fails), n, fails[0])
	}
	acked := make(map[string]bool, n)
	for i := range n {
		u, err := url.Parse(target(i))
		if err != nil {
			t.Fatal(err)
		}
		acked[u.RequestURI()] = true
	}
	return acked
}

// Poll polls cond (typically the admin API) until it holds, or fails
// the test after slack times limit.
func Poll(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	limit *= slack
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s not reached", limit, what)
		}
		<-tick.C
	}
}
