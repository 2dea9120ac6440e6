package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// netns is a network namespace a test made for itself (ip netns add):
// its own loopback, its own iptables, its own /etc/hosts for the
// processes started with ip netns exec.
type netns struct {
	name string
	fd   int
}

// newNetns makes a network namespace with lo up and 203.0.113.10 on it,
// where names resolve (for processes started in it) to 203.0.113.10.
func newNetns(t *testing.T, names ...string) *netns {
	t.Helper()
	b := make([]byte, 4)
	rand.Read(b)
	ns := &netns{name: "hp-" + hex.EncodeToString(b)}
	etc := filepath.Join("/etc/netns", ns.name)
	if out, err := exec.Command("ip", "netns", "add", ns.name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s (needs root and iproute2): %v\n%s", ns.name, err, out)
	}
	t.Cleanup(func() {
		exec.Command("ip", "netns", "delete", ns.name).Run()
		os.RemoveAll(etc)
	})
	for _, args := range [][]string{{"link", "set", "lo", "up"}, {"addr", "add", "203.0.113.10/32", "dev", "lo"}} {
		if out, err := exec.Command("ip", append([]string{"-n", ns.name}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip -n %s %v: %v\n%s", ns.name, args, err, out)
		}
	}
	fd, err := unix.Open("/run/netns/"+ns.name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ns.fd = fd
	t.Cleanup(func() { unix.Close(fd) })
	// ip netns exec bind-mounts /etc/netns/NAME/* over /etc.
	if err := os.MkdirAll(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	hosts := "127.0.0.1 localhost\n203.0.113.10 " + strings.Join(names, " ") + "\n"
	if err := os.WriteFile(filepath.Join(etc, "hosts"), []byte(hosts), 0o644); err != nil {
		t.Fatal(err)
	}
	return ns
}

// do runs f on a thread inside the namespace: sockets f makes stay in it.
// The thread goes back to the test's namespace after f, or, if it cannot,
// ends with its goroutine (it stays locked).
func (ns *netns) do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer unix.Close(self)
		if err := unix.Setns(ns.fd, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", ns.name, err)
			return
		}
		err = f()
		if unix.Setns(self, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

func (ns *netns) listen(t *testing.T, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	if err := ns.do(func() (err error) { ln, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatalf("listen on %s in %s: %v", addr, ns.name, err)
	}
	return ln
}

// client is an HTTP client whose connections are made in the namespace.
func (ns *netns) client() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (c net.Conn, err error) {
			err = ns.do(func() error { c, err = (&net.Dialer{}).DialContext(ctx, network, addr); return err })
			return c, err
		}}}
}

// exec is cmd run in the namespace (its /etc/hosts) as root.
func (ns *netns) exec(name string, args ...string) *exec.Cmd {
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns.name, name}, args...)...)
	dieWithTest(cmd)
	return cmd
}

// asNobody is cmd run in the namespace as uid and gid 65534.
func (ns *netns) asNobody(name string, args ...string) *exec.Cmd {
	return ns.exec("setpriv", append([]string{"--pdeathsig", "keep", "--reuid", "65534", "--regid", "65534", "--clear-groups", "--", name}, args...)...)
}

// publicDir is a directory uid 65534 can read, with the path to it.
func publicDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// startInNetns starts hookpace in ns (as root, the uid the rules exclude).
func startInNetns(t *testing.T, ns *netns, cfg string) *Hookpace {
	t.Helper()
	h := &Hookpace{t: t, Dir: t.TempDir(), prefix: []string{"ip", "netns", "exec", ns.name}}
	h.Config = filepath.Join(h.Dir, "hookpace.yaml")
	writeConfig(t, h.Config, "127.0.0.1:0", "127.0.0.1:0", filepath.Join(h.Dir, "spool"), cfg)
	h.start()
	t.Cleanup(func() { h.Kill() })
	return h
}

const captureSenders = `
import sys, requests
s = requests.Session()
for i, u in enumerate(sys.argv[1:]):
    r = s.post(u, json={"via": "requests", "n": i})
    print(r.status_code, r.headers.get("X-Hookpace-Id"))
`

const captureNode = `
for (const [i, u] of process.argv.slice(1).entries()) {
  const r = await fetch(u, {method: "POST", headers: {"content-type": "application/json"}, body: JSON.stringify({via: "node", n: i})});
  await r.text();
  console.log(r.status, r.headers.get("x-hookpace-id"));
}
`

const captureJava = `import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;

public class CaptureSender {
    public static void main(String[] args) throws Exception {
        HttpClient client = HttpClient.newHttpClient();
        for (int i = 0; i < args.length; i++) {
            HttpRequest req = HttpRequest.newBuilder(URI.create(args[i]))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString("{\"via\":\"java\",\"n\":" + i + "}"))
                .build();
            HttpResponse<String> resp = client.send(req, HttpResponse.BodyHandlers.ofString());
            System.out.println(resp.statusCode() + " " + resp.headers().firstValue("x-hookpace-id").orElse(""));
        }
    }
}
`

const captureGo = `package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

func main() {
	for i, u := range os.Args[1:] {
		resp, err := http.Post(u, "application/json", strings.NewReader(fmt.Sprintf(` + "`" + `{"via":"go","n":%d}` + "`" + `, i)))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("X-Hookpace-Id"))
	}
}
`

// TestCaptureEveryRuntime: in a network namespace of its own, a partner
// on 203.0.113.10 (https on 443, http on 80) named partner.test, hookpace
// as root with capture.listen, and `hookpace capture rules --apply`
// redirecting uid 65534's TCP 80 and 443 to it. curl, Python requests,
// Node 20's fetch, Java's HttpClient and Go's net/http run as uid 65534
// with no proxy variable, only each one's CA-trust variable, and post 4
// https:// and 2 http:// webhooks each: all get 202 with an id, all arrive
// once with X-Hookpace-Id (none without: nothing went around hookpace),
// paced at 20/s with a burst of 5; hookpace's own deliveries (uid 0) were
// not captured.
func TestCaptureEveryRuntime(t *testing.T) {
	t.Parallel()
	ns := newNetns(t, "partner.test")
	base, partnerCA := tlsPartner(t, "partner.test")
	partner := nsStart(t, ns, "203.0.113.10:443", base, &Receiver{})
	plain := nsStart(t, ns, "203.0.113.10:80", nil, &Receiver{})

	pub := publicDir(t)
	const rate, burst = 20, 5
	hp := startInNetns(t, ns, fmt.Sprintf(`
capture: {listen: "127.0.0.1:15001"}
egress: {allow: ["203.0.113.10"]}
tls: {ca_file: %s}
mitm: {public_dir: %s}
hosts:
  "partner.test": {rate: %d/s, burst: %d}
`, partnerCA, filepath.Join(pub, "trust"), rate, burst))
	if out, err := ns.exec(binary, "capture", "rules", "--to", "15001", "--exclude-uid", "0", "--apply").CombinedOutput(); err != nil {
		t.Fatalf("hookpace capture rules --apply: %v\n%s", err, out)
	}
	bundle := hookpaceCA(t, hp, "bundle")
	trustStore := filepath.Join(filepath.Dir(bundle), "truststore.p12")

	// The senders, readable by uid 65534.
	write := func(name, text string) string {
		p := filepath.Join(pub, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	goSrc := write("gosender.go", captureGo)
	goBin := filepath.Join(pub, "gosender")
	if out, err := exec.Command("go", "build", "-o", goBin, goSrc).CombinedOutput(); err != nil {
		t.Fatalf("build the Go sender: %v\n%s", err, out)
	}
	javaSrc := write("CaptureSender.java", captureJava)
	nodeFound.Do(func() {
		cache, _ := os.UserCacheDir()
		nodeFound.path, nodeFound.err = findNode20(t, filepath.Join(cache, "hookpace-node20"))
	})
	if nodeFound.err != nil {
		t.Fatal(nodeFound.err)
	}
	node := nodeFound.path
	if !strings.HasPrefix(node, "/usr/") { // installed under root's cache: a copy uid 65534 can run
		b, err := os.ReadFile(node)
		if err != nil {
			t.Fatal(err)
		}
		node = filepath.Join(pub, "node")
		if err := os.WriteFile(node, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	var urls []string
	for i := range 4 {
		urls = append(urls, fmt.Sprintf("https://partner.test/hooks/%d", i))
	}
	urls = append(urls, "http://partner.test/hooks/4", "http://partner.test/hooks/5")
	var curlCfg strings.Builder
	for i, u := range urls {
		if i > 0 {
			curlCfg.WriteString("next\n")
		}
		fmt.Fprintf(&curlCfg, "url = %q\nrequest = POST\ndata = \"{\\\"via\\\":\\\"curl\\\"}\"\nsilent\nshow-error\noutput = /dev/null\nwrite-out = \"%%{http_code} %%header{x-hookpace-id}\\n\"\n", u)
	}
	home := "HOME=" + pub
	clients := []struct {
		who string
		cmd *exec.Cmd
	}{
		{"curl (CURL_CA_BUNDLE)", ns.asNobody("curl", "--config", write("curl.cfg", curlCfg.String()))},
		{"Python requests (REQUESTS_CA_BUNDLE)", ns.asNobody(debianPython, append([]string{"-c", captureSenders}, urls...)...)},
		{"Node 20 fetch (NODE_EXTRA_CA_CERTS)", ns.asNobody(node, append([]string{"--input-type=module", "-e", captureNode}, urls...)...)},
		{"Java HttpClient (JAVA_TOOL_OPTIONS trust store)", ns.asNobody("java", append([]string{javaSrc}, urls...)...)},
		{"Go net/http (SSL_CERT_FILE)", ns.asNobody(goBin, urls...)},
	}
	clients[0].cmd.Env = appEnv(home, "CURL_CA_BUNDLE="+bundle)
	clients[1].cmd.Env = appEnv(home, "REQUESTS_CA_BUNDLE="+bundle)
	clients[2].cmd.Env = appEnv(home, "NODE_EXTRA_CA_CERTS="+bundle)
	clients[3].cmd.Env = appEnv(home, "JAVA_TOOL_OPTIONS=-Djavax.net.ssl.trustStore="+trustStore+
		" -Djavax.net.ssl.trustStoreType=PKCS12 -Djavax.net.ssl.trustStorePassword=changeit")
	clients[4].cmd.Env = appEnv(home, "SSL_CERT_FILE="+bundle)
	outs := make([][]byte, len(clients))
	errs := make([]error, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() { outs[i], errs[i] = c.cmd.CombinedOutput() })
	}
	wg.Wait()
	var ids []string
	for i, c := range clients {
		ids = append(ids, sent(t, c.who, outs[i], errs[i], len(urls))...)
	}

	https, http1 := 4*len(clients), 2*len(clients)
	partner.WaitFor(t, 60*time.Second, fmt.Sprintf("%d https webhooks at the partner", https), func(as []Arrival) bool { return len(as) >= https })
	plain.WaitFor(t, 60*time.Second, fmt.Sprintf("%d http webhooks at the partner", http1), func(as []Arrival) bool { return len(as) >= http1 })
	got := map[string]int{}
	for _, a := range append(partner.Arrivals(), plain.Arrivals()...) {
		id := a.Header.Get("X-Hookpace-Id")
		if id == "" {
			t.Errorf("a webhook arrived at %s without X-Hookpace-Id: it went around hookpace", a.Path)
		}
		got[id]++
	}
	for _, id := range ids {
		if got[id] != 1 {
			t.Errorf("webhook %s arrived %d times, want once", id, got[id])
		}
	}
	if len(got) != len(ids) {
		t.Errorf("%d distinct webhooks arrived, want %d", len(got), len(ids))
	}
	if most := busiest(partner.Arrivals(), time.Second); most > 25 {
		t.Errorf("busiest 1 s of https arrivals: %d, want at most 25 (burst %d + rate %d/s)", most, burst, rate)
	} else {
		t.Logf("%d webhooks from %d runtimes, none around hookpace; busiest 1 s of https: %d", len(ids), len(clients), most)
	}

	// Every https connection was decided as a CONNECT to partner.test
	// would be, and counted so; hookpace's own deliveries (uid 0) went
	// out around the capture (the uid rule's counter).
	resp, err := ns.client().Get("http://" + hp.Admin + "/metrics")
	if err != nil {
		t.Fatalf("metrics from inside the namespace: %v", err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// A connection each at least (the clients keep theirs alive), all intercepted.
	var tunnels int
	tl := grepLines(string(m), "hookpace_tunnels_total{")
	if _, err := fmt.Sscanf(grepLines(tl, `mode="intercepted"`), `hookpace_tunnels_total{host="partner.test",mode="intercepted"} %d`, &tunnels); err != nil ||
		tunnels < len(clients) || strings.Contains(tl, "passthrough") || strings.Contains(tl, "refused") {
		t.Errorf("hookpace_tunnels_total: want at least %d intercepted captures of partner.test and nothing else:\n%s", len(clients), tl)
	}
	out, err := ns.exec("iptables", "-w", "-t", "nat", "-L", "HOOKPACE_OUTPUT", "-v", "-n", "-x").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables -L HOOKPACE_OUTPUT: %v\n%s", err, out)
	}
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) > 2 && strings.Contains(line, "owner UID match 0") && f[0] == "0" {
			t.Errorf("hookpace's own connections did not pass the uid rule (0 packets):\n%s", out)
		}
	}
	// An app that does not trust hookpace's CA fails loudly, and hookpace
	// counts, names and lists the rejection.
	c := ns.asNobody("curl", "-sS", "-o", "/dev/null", "-X", "POST", "-d", "{}", "https://partner.test/untrusted")
	c.Env = appEnv(home)
	if out, err := c.CombinedOutput(); err == nil {
		t.Fatalf("curl without the trust bundle got through: %s", out)
	}
	Poll(t, 30*time.Second, "the rejection counted", func() bool {
		resp, err := ns.client().Get("http://" + hp.Admin + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		m, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(m), `hookpace_tunnels_total{host="partner.test",mode="rejected"} 1`)
	})
	// The log is written out every 100 ms.
	Poll(t, 30*time.Second, "the rejection's warning", func() bool { return strings.Contains(hp.Log(), "rejected hookpace's certificate") })
	if n := strings.Count(hp.Log(), "rejected hookpace's certificate"); n != 1 || !strings.Contains(hp.Log(), "CURL_CA_BUNDLE (curl)") {
		t.Errorf("%d rejection warnings naming the variables, want one:\n%s", n, grepLines(hp.Log(), "rejected"))
	}
	resp, err = ns.client().Get("http://" + hp.Admin + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), `data-host="partner.test" data-mode="rejected"`) {
		t.Errorf("the status page does not list partner.test's rejection")
	}
	if strings.Contains(hp.Log(), "capture: connection refused") || strings.Contains(hp.Log(), "capture listener itself") {
		t.Errorf("hookpace refused captured connections:\n%s", grepLines(hp.Log(), "capture"))
	}
}
