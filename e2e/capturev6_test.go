package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// nsReceiver is a receiver on addr inside ns, over TLS when tlsFrom (a
// tlsPartner's receiver, for its certificate) is given. It closes each
// connection after its answer: every delivery is a new connection, which
// the nat table's rules see.
func nsReceiver(t *testing.T, ns *netns, addr string, tlsFrom *Receiver) *Receiver {
	t.Helper()
	return nsStart(t, ns, addr, tlsFrom, &Receiver{notify: make(chan struct{}, 1), Handle: func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusOK)
	}})
}

// nsStart starts rc on addr inside ns, over TLS when tlsFrom is given.
func nsStart(t *testing.T, ns *netns, addr string, tlsFrom, rc *Receiver) *Receiver {
	t.Helper()
	if rc.notify == nil {
		rc.notify = make(chan struct{}, 1)
	}
	rc.Server = httptest.NewUnstartedServer(http.HandlerFunc(rc.serve))
	rc.Listener.Close()
	rc.Listener = ns.listen(t, addr)
	if tlsFrom != nil {
		rc.TLS = tlsFrom.TLS.Clone()
		rc.StartTLS()
	} else {
		rc.Start()
	}
	t.Cleanup(rc.Close)
	return rc
}

// redirected is the packet counters of a HOOKPACE_OUTPUT chain
// (iptables or ip6tables): the RETURN of uid's connections, and the
// REDIRECT. In the nat table each counts a connection's first packet
// only: the REDIRECT's count is exactly the connections captured.
func redirected(t *testing.T, ns *netns, tables string, uid int) (own, captured int) {
	t.Helper()
	out, err := ns.exec(tables, "-w", "-t", "nat", "-L", "HOOKPACE_OUTPUT", "-v", "-n", "-x").CombinedOutput()
	if err != nil {
		t.Fatalf("%s -L HOOKPACE_OUTPUT: %v\n%s", tables, err, out)
	}
	own, captured = -1, -1
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		n, err := strconv.Atoi(f[0])
		if err != nil {
			continue
		}
		switch {
		case strings.Contains(line, "owner UID match "+strconv.Itoa(uid)):
			own = n
		case f[2] == "REDIRECT":
			captured = n
		}
	}
	if own < 0 || captured < 0 {
		t.Fatalf("%s: no uid RETURN or REDIRECT rule in HOOKPACE_OUTPUT:\n%s", tables, out)
	}
	return own, captured
}

// TestCaptureIPv6AndReload: in a network namespace of its own with a
// partner on 203.0.113.10 (plain HTTP, partner4.test) and on
// 2001:db8::10 (TLS and plain HTTP, partner.test), hookpace with
// capture.listen ":15001" (every address: IPv4 redirects arrive at
// 127.0.0.1, IPv6 ones at ::1) and `hookpace capture rules --apply` for
// uid 65534. curl as uid 65534 posts over both families, before and after
// a config reload: each webhook gets 202 with an id and arrives once with
// X-Hookpace-Id, and in each family the REDIRECT rule counted exactly
// the clients' connections while hookpace's own deliveries passed the
// uid rule: none was captured, after the reload either.
func TestCaptureIPv6AndReload(t *testing.T) {
	t.Parallel()
	ns := newNetns(t, "partner4.test")
	if out, err := exec6(ns); err != nil {
		t.Fatalf("an IPv6 partner address in %s: %v\n%s", ns.name, err, out)
	}
	hosts := filepath.Join("/etc/netns", ns.name, "hosts")
	f, err := os.OpenFile(hosts, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, "2001:db8::10 partner.test")
	f.Close()

	base, partnerCA := tlsPartner(t, "partner.test")
	tls6 := nsReceiver(t, ns, "[2001:db8::10]:443", base)
	plain6 := nsReceiver(t, ns, "[2001:db8::10]:80", nil)
	plain4 := nsReceiver(t, ns, "203.0.113.10:80", nil)

	pub := publicDir(t)
	cfg := func(rate int) string {
		return fmt.Sprintf(`
capture: {listen: ":15001"}
egress: {allow: ["203.0.113.10", "2001:db8::10"]}
tls: {ca_file: %s}
mitm: {public_dir: %s}
hosts:
  "partner.test": {rate: %d/s, burst: 5}
  "partner4.test": {rate: %d/s, burst: 5}
`, partnerCA, filepath.Join(pub, "trust"), rate, rate)
	}
	hp := startInNetns(t, ns, cfg(20))
	if out, err := ns.exec(binary, "capture", "rules", "--to", "15001", "--exclude-uid", "0", "--apply").CombinedOutput(); err != nil {
		t.Fatalf("hookpace capture rules --apply: %v\n%s", err, out)
	}
	bundle := hookpaceCA(t, hp, "bundle")

	// One curl per webhook: one connection each, which the REDIRECT
	// rules count.
	post := func(round int) (ids []string, v4, v6 int) {
		urls := []string{
			fmt.Sprintf("https://partner.test/r%d/tls6", round),
			fmt.Sprintf("http://partner.test/r%d/plain6", round),
			fmt.Sprintf("http://partner4.test/r%d/plain4", round),
			fmt.Sprintf("https://partner.test/r%d/tls6b", round),
		}
		for _, u := range urls {
			c := ns.asNobody("curl", "-sS", "-o", "/dev/null", "-X", "POST", "-d", `{"via":"curl"}`,
				"-w", "%{http_code} %header{x-hookpace-id}\n", u)
			c.Env = appEnv("HOME="+pub, "CURL_CA_BUNDLE="+bundle)
			out, err := c.CombinedOutput()
			ids = append(ids, sent(t, "curl "+u, out, err, 1)...)
			if strings.Contains(u, "partner4") {
				v4++
			} else {
				v6++
			}
		}
		return ids, v4, v6
	}
	ids, want4, want6 := post(1)

	// A reload (the rates change), then the same again.
	tmp := hp.Config + ".new"
	writeConfig(t, tmp, "127.0.0.1:0", "127.0.0.1:0", filepath.Join(hp.Dir, "spool"), cfg(30))
	if err := os.Rename(tmp, hp.Config); err != nil {
		t.Fatal(err)
	}
	Poll(t, 30*time.Second, "the reload", func() bool { return strings.Contains(hp.Log(), "config reloaded") })
	own4, _ := redirected(t, ns, "iptables", 0)
	own6, _ := redirected(t, ns, "ip6tables", 0)
	more, n4, n6 := post(2)
	ids, want4, want6 = append(ids, more...), want4+n4, want6+n6

	all := func() []Arrival { return append(append(tls6.Arrivals(), plain6.Arrivals()...), plain4.Arrivals()...) }
	Poll(t, 60*time.Second, fmt.Sprintf("%d webhooks at the partners", len(ids)), func() bool { return len(all()) >= len(ids) })
	got := map[string]int{}
	for _, a := range all() {
		id := a.Header.Get("X-Hookpace-Id")
		if id == "" {
			t.Errorf("%s arrived without X-Hookpace-Id: it went around hookpace", a.Path)
		}
		got[id]++
	}
	for _, id := range ids {
		if got[id] != 1 {
			t.Errorf("webhook %s arrived %d times, want once", id, got[id])
		}
	}
	if len(tls6.Arrivals()) != 4 || len(plain6.Arrivals()) != 2 || len(plain4.Arrivals()) != 2 {
		t.Errorf("arrivals: %d TLS over IPv6, %d plain over IPv6, %d plain over IPv4; want 4, 2, 2",
			len(tls6.Arrivals()), len(plain6.Arrivals()), len(plain4.Arrivals()))
	}
	// The deliveries after the reload went out past the uid rule, and
	// the REDIRECTs are the clients' connections alone: had a delivery
	// been captured, it would be one more.
	for _, fam := range []struct {
		tables     string
		own, want  int
		deliveries int // after the reload
	}{{"iptables", own4, want4, n4}, {"ip6tables", own6, want6, n6}} {
		own, captured := redirected(t, ns, fam.tables, 0)
		if captured != fam.want {
			t.Errorf("%s: %d connections redirected, want the clients' %d", fam.tables, captured, fam.want)
		}
		if own-fam.own < fam.deliveries {
			t.Errorf("%s: %d of hookpace's connections passed the uid rule after the reload, want one a delivery (%d)", fam.tables, own-fam.own, fam.deliveries)
		}
	}
	resp, err := ns.client().Get("http://" + hp.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if tl := grepLines(string(m), "hookpace_tunnels_total{"); !strings.Contains(tl, `host="partner.test",mode="intercepted"`) || strings.Contains(tl, "refused") {
		t.Errorf("hookpace_tunnels_total: want partner.test's TLS over IPv6 intercepted, nothing refused:\n%s", tl)
	}
	if strings.Contains(hp.Log(), "capture: connection refused") || strings.Contains(hp.Log(), "capture listener itself") {
		t.Errorf("hookpace refused captured connections:\n%s", grepLines(hp.Log(), "capture"))
	}
	// The listener is on every address; one dialled directly (not
	// redirected: root is not captured, nor is port 15001) is refused.
	for _, addr := range []string{"203.0.113.10:15001", "[2001:db8::10]:15001"} {
		out, err := ns.exec("curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "-d", "{}", "http://"+addr+"/direct").CombinedOutput()
		if err == nil || strings.HasPrefix(string(out), "202") {
			t.Errorf("a direct connection to the capture listener on %s was served: %v %s", addr, err, out)
		}
	}
	Poll(t, 30*time.Second, "the direct connections refused", func() bool { return strings.Count(hp.Log(), "capture listener itself") >= 2 })
	for _, a := range all() {
		if strings.Contains(a.Path, "direct") {
			t.Errorf("a direct connection to the capture listener was delivered: %s", a.Path)
		}
	}
}

// exec6 puts the IPv6 partner address 2001:db8::10 on ns's loopback.
func exec6(ns *netns) ([]byte, error) {
	return ns.exec("ip", "-6", "addr", "add", "2001:db8::10/128", "dev", "lo", "nodad").CombinedOutput()
}
