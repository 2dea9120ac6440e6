package e2e

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/websocket"
)

// chromiumPath is the Debian package chromium's binary; .ci/run installs it.
const chromiumPath = "/usr/bin/chromium"

// Browser is a headless Chromium driven over the DevTools protocol: one
// page, commands sent one at a time over its WebSocket.
type Browser struct {
	t    *testing.T
	cmd  *exec.Cmd
	ws   *websocket.Conn
	next atomic.Int64
}

// StartBrowser starts headless Chromium with a fresh profile and attaches
// to its first page. It fails the test when Chromium is not installed.
func StartBrowser(t *testing.T) *Browser {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("headless Chromium is needed at %s (Debian package chromium; .ci/run installs it): %v", chromiumPath, err)
	}
	cmd := exec.Command(chromiumPath, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
		"--no-default-browser-check", "--no-proxy-server", "--user-data-dir="+t.TempDir(),
		"--window-size=1440,900", "--hide-scrollbars", "--force-device-scale-factor=1",
		"--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "--remote-allow-origins=*", "about:blank")
	// Its own process group, killed whole at the end: Chromium's zygote,
	// renderers and crash handler must not outlive the test.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	b := &Browser{t: t, cmd: cmd}
	t.Cleanup(b.close)

	// "DevTools listening on ws://127.0.0.1:PORT/devtools/browser/ID"
	found := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`DevTools listening on ws://([^/]+)/`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		close(found)
	}()
	var addr string
	select {
	case a, ok := <-found:
		if !ok {
			t.Fatal("chromium exited without a DevTools address")
		}
		addr = a
	case <-time.After(30 * time.Second):
		t.Fatal("chromium did not announce its DevTools address within 30 s")
	}
	b.attach(addr)
	return b
}

// attach connects to the page target that Chromium opened.
func (b *Browser) attach(addr string) {
	t := b.t
	resp, err := http.Get("http://" + addr + "/json/list")
	if err != nil {
		t.Fatalf("DevTools target list: %v", err)
	}
	defer resp.Body.Close()
	var targets []struct{ Type, WebSocketDebuggerURL string }
	if err := json.NewDecoder(resp.Body).Decode(&targets); err != nil {
		t.Fatalf("DevTools target list: %v", err)
	}
	for _, tg := range targets {
		if tg.Type == "page" {
			if b.ws, err = websocket.Dial(tg.WebSocketDebuggerURL, "", "http://127.0.0.1/"); err != nil {
				t.Fatalf("DevTools WebSocket: %v", err)
			}
			b.ws.MaxPayloadBytes = 64 << 20
			return
		}
	}
	t.Fatalf("no page among Chromium's targets: %+v", targets)
}

func (b *Browser) close() {
	if b.ws != nil {
		b.ws.Close()
	}
	syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
	b.cmd.Wait()
}

// call sends one DevTools command and returns its result, skipping the
// events that arrive meanwhile.
func (b *Browser) call(method string, params any, result any) {
	b.t.Helper()
	if err := b.try(method, params, result); err != nil {
		b.t.Fatalf("DevTools %s: %v", method, err)
	}
}

// errNavigated is what DevTools answers a command that the page's
// navigation overtook: the document it was for is gone.
var errNavigated = errors.New("the page navigated meanwhile")

// navigated reports whether DevTools' message says the command was for a
// document that is gone (Chromium's words for it).
func navigated(msg string) bool {
	for _, s := range []string{"Inspected target navigated or closed", "Execution context was destroyed",
		"Cannot find context with specified id", "Cannot find default execution context"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// try is call that returns errNavigated instead of failing the test when
// a navigation overtook the command.
func (b *Browser) try(method string, params any, result any) error {
	b.t.Helper()
	id := b.next.Add(1)
	msg := map[string]any{"id": id, "method": method, "params": params}
	if err := websocket.JSON.Send(b.ws, msg); err != nil {
		b.t.Fatalf("DevTools %s: %v", method, err)
	}
	b.ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		var in struct {
			ID     int64
			Result json.RawMessage
			Error  *struct{ Message string }
		}
		if err := websocket.JSON.Receive(b.ws, &in); err != nil {
			b.t.Fatalf("DevTools %s: %v", method, err)
		}
		if in.ID != id {
			continue
		}
		if in.Error != nil {
			if navigated(in.Error.Message) {
				return errNavigated
			}
			b.t.Fatalf("DevTools %s: %s", method, in.Error.Message)
		}
		if result != nil {
			if err := json.Unmarshal(in.Result, result); err != nil {
				b.t.Fatalf("DevTools %s: %v", method, err)
			}
		}
		return nil
	}
}

// Eval evaluates a JavaScript expression in the page (awaiting a promise)
// and decodes its value, which must be JSON-serializable, into v. Use it
// only while nothing navigates; Until waits through navigations.
func (b *Browser) Eval(expr string, v any) {
	b.t.Helper()
	if err := b.TryEval(expr, v); err != nil {
		b.t.Fatalf("evaluating %s: %v", expr, err)
	}
}

// TryEval is Eval that returns errNavigated when a navigation (a form
// posted, a redirect) overtook the evaluation instead of failing.
func (b *Browser) TryEval(expr string, v any) error {
	b.t.Helper()
	var out struct {
		Result struct {
			Value json.RawMessage
		}
		ExceptionDetails *struct {
			Text      string
			Exception struct{ Description string }
		}
	}
	if err := b.try("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &out); err != nil {
		return err
	}
	if e := out.ExceptionDetails; e != nil {
		if navigated(e.Text + " " + e.Exception.Description) {
			return errNavigated
		}
		b.t.Fatalf("evaluating %s: %s %s", expr, e.Text, e.Exception.Description)
	}
	if v != nil {
		if err := json.Unmarshal(out.Result.Value, v); err != nil {
			b.t.Fatalf("evaluating %s: %v (value %s)", expr, err, out.Result.Value)
		}
	}
	return nil
}

// Until evaluates expr into v until ok holds, through navigations (an
// evaluation a navigation overtook counts as not yet), or fails the test
// after 20 s. It is how a test waits for what the page will show, rather
// than racing the page.
func (b *Browser) Until(what, expr string, v any, ok func() bool) {
	b.t.Helper()
	Poll(b.t, 20*time.Second, what, func() bool {
		return b.TryEval(expr, v) == nil && ok()
	})
}

// Navigate loads url and waits until the document has loaded.
func (b *Browser) Navigate(url string) {
	b.t.Helper()
	b.Go(url)
	b.WaitLoaded(func(href string) bool { return strings.HasPrefix(href, url) })
}

// Go starts loading url and returns at once: for a page that navigates
// on by itself (it posts a form), whose next location the caller waits for
// with WaitLoaded.
func (b *Browser) Go(url string) {
	b.t.Helper()
	var out struct{ ErrorText string }
	b.call("Page.navigate", map[string]any{"url": url}, &out)
	if out.ErrorText != "" {
		b.t.Fatalf("navigate to %s: %s", url, out.ErrorText)
	}
}

// WaitLoaded waits until the page's location satisfies at and its
// document has loaded, through any navigation on the way.
func (b *Browser) WaitLoaded(at func(href string) bool) {
	b.t.Helper()
	var st struct{ Href, State string }
	b.Until("the page loaded", `({href: location.href, state: document.readyState})`, &st, func() bool {
		return at(st.Href) && st.State == "complete"
	})
}

// Screenshot saves a PNG of the viewport (full page: the whole document).
func (b *Browser) Screenshot(path string, fullPage bool) {
	b.t.Helper()
	var out struct{ Data string }
	b.call("Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": fullPage}, &out)
	png, err := base64.StdEncoding.DecodeString(out.Data)
	if err != nil || len(png) < 8 || string(png[1:4]) != "PNG" {
		b.t.Fatalf("screenshot: %v (%d bytes)", err, len(png))
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s (%d bytes)", path, len(png))
}

// artifactDir is where a test leaves files worth looking at:
// $HOOKPACE_E2E_ARTIFACTS when set (kept), else a temp dir.
func artifactDir(t *testing.T) string {
	if d := os.Getenv("HOOKPACE_E2E_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}
