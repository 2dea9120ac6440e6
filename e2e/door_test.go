package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// trickle opens a connection to the proxy and sends a webhook's headers
// announcing n body bytes, then one body byte every interval until the
// proxy answers (or all n are sent). It returns the answer's status line
// and how many body bytes went out.
func trickle(t *testing.T, proxyAddr, target string, n int, interval time.Duration) (status string, sent int) {
	t.Helper()
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return trickleOn(c, fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n",
		target, strings.SplitN(target, "/", 4)[2], n), n, interval)
}

// answerWhileSending sends req on a new connection to addr and reads the
// status line of the answer while it is still sending.
func answerWhileSending(t *testing.T, addr, req string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go c.Write([]byte(req)) // fails once the server resets: the answer is what counts
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	return line
}

// A client trickling its body is cut off at proxy.body_timeout
// with 408, and nothing is stored.
func TestSlowBodyGets408(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, "egress: {allow: [\"127.0.0.0/8\"]}\nproxy: {body_timeout: 1s}\n")
	status, sent := trickle(t, hp.Proxy, rc.URL+"/slow", 1000, 100*time.Millisecond)
	if !strings.Contains(status, " 408 ") {
		t.Fatalf("trickling client got %q after %d of 1000 body bytes, want 408", status, sent)
	}
	if sent >= 1000 {
		t.Errorf("the whole body went out before the answer: not cut off")
	}
	t.Logf("cut off with %q after %d of 1000 body bytes (one per 100 ms)", status, sent)
	var sp struct{ Messages int }
	hp.AdminJSON("/v1/spool", &sp)
	if sp.Messages != 0 || rc.Count(nil) != 0 {
		t.Errorf("a cut-off webhook was stored (%d queued) or delivered (%d)", sp.Messages, rc.Count(nil))
	}
	Poll(t, 5*time.Second, "an ingest line naming proxy.body_timeout", func() bool {
		return strings.Contains(hp.Log(), "status=408") && strings.Contains(hp.Log(), "proxy.body_timeout")
	})
}

// With more connections than proxy.max_connections, /healthz
// still answers and a normal webhook gets its 202 once a slot frees.
func TestMaxConnectionsKeepsAdminAndQueuesClients(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, "egress: {allow: [\"127.0.0.0/8\"]}\nproxy: {max_connections: 4, body_timeout: 2s}\n")
	const slow = 8 // twice the cap
	const bodyTimeout = 2 * time.Second
	var wg sync.WaitGroup
	opened := time.Now()
	// Every slow client connects before the normal one does: the kernel
	// queues connections past the cap in order, so the normal one waits.
	for i := range slow {
		c, err := net.Dial("tcp", hp.Proxy)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer c.Close()
			status, _ := trickleOn(c, fmt.Sprintf("POST %s/slow/%d HTTP/1.1\r\nHost: %s\r\nContent-Length: 1000\r\n\r\n", rc.URL, i, rc.Host()),
				1000, 200*time.Millisecond)
			if !strings.Contains(status, " 408 ") {
				t.Errorf("trickler %d: %q, want 408", i, status)
			}
		})
	}
	// The slow clients hold every slot (or wait for one): the admin
	// listener answers all the same.
	for range 5 {
		if code := opsAdminCode(t, hp, "/healthz"); code != http.StatusOK {
			t.Errorf("/healthz under the flood: %d", code)
		}
	}
	status, _ := hp.Post(hp.Client(), rc.URL+"/normal", WebhookBody(1), nil)
	waited := time.Since(opened)
	if status != http.StatusAccepted {
		t.Errorf("normal webhook under the flood: %d, want 202", status)
	}
	wg.Wait()
	// No slow client is cut off before body_timeout has passed since it
	// connected, so a webhook that waited for a slot is answered at least
	// that long after they started; hookpace's clock sets the bound, not
	// the order in which goroutines here notice their answers.
	if waited < bodyTimeout {
		t.Errorf("the normal webhook was answered %v after the slow clients connected, before body_timeout (%v) could cut one off: the cap of 4 did not hold", waited, bodyTimeout)
	}
	rc.WaitFor(t, 10*time.Second, "the normal webhook", func(as []Arrival) bool { return len(as) == 1 })
}

// A body over max_body, sent by a client that writes all of it
// before reading (Python's urllib), reads the 413 and its reason.
func TestTooLargeReadByWriteFirstClient(t *testing.T) {
	t.Parallel()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed for this test (apt-get install -y python3)")
	}
	rc := NewReceiver(t)
	hp := Start(t, "egress: {allow: [\"127.0.0.0/8\"]}\nspool: {max_body: 1MiB}\n")
	script := `
import sys, urllib.request, urllib.error
opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": "http://" + sys.argv[1]}))
req = urllib.request.Request(sys.argv[2], data=b"x" * (5 * 1000 * 1000), method="POST")
try:
    r = opener.open(req, timeout=30)
    print(r.status, r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode().strip())
`
	for i := range 3 {
		out, err := exec.Command(py, "-c", script, hp.Proxy, rc.URL+"/big").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "413 ") || !strings.Contains(string(out), "spool.max_body") {
			t.Errorf("try %d: urllib posting 5 MB: %v\n%s", i, err, out)
		}
	}
	if rc.Count(nil) != 0 {
		t.Errorf("%d deliveries of a refused body", rc.Count(nil))
	}
}

// Headers are bounded by spool.max_header_bytes (431).
func TestHeadersOverMaxHeaderBytesGet431(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, "egress: {allow: [\"127.0.0.0/8\"]}\nspool: {max_header_bytes: 16KiB}\n")
	// The ingest check.
	hdr := http.Header{"X-Big": {strings.Repeat("h", 17<<10)}}
	if status, _ := hp.Post(hp.Client(), rc.URL+"/h", WebhookBody(1), hdr); status != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("17 KiB header: %d, want 431", status)
	}
	// The listener's own cap. It answers before the client has written
	// its header, stops reading, and resets the connection half a second
	// later; net/http's client, still writing, may report the reset and
	// not the answer when it ran late, so the answer is read as it comes.
	body := WebhookBody(1)
	req := fmt.Sprintf("POST %s/h HTTP/1.1\r\nHost: %s\r\nX-Big: %s\r\nContent-Length: %d\r\n\r\n%s",
		rc.URL, strings.TrimPrefix(rc.URL, "http://"), strings.Repeat("h", 200<<10), len(body), body)
	if status := answerWhileSending(t, hp.Proxy, req); !strings.Contains(status, " 431 ") {
		t.Errorf("200 KiB header: %q, want 431", status)
	}
	if status, _ := hp.Post(hp.Client(), rc.URL+"/h", WebhookBody(1), http.Header{"X-Ok": {strings.Repeat("h", 8<<10)}}); status != http.StatusAccepted {
		t.Errorf("8 KiB header: %d, want 202", status)
	}
	rc.WaitFor(t, 10*time.Second, "the one accepted", func(as []Arrival) bool { return len(as) == 1 })
}
