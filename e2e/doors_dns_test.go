package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// TestDoorNeverWaitsForDNS: hookpace's resolver (its own /etc/resolv.conf,
// in a mount namespace of its own) is a loopback address that reads every
// query and answers none, as a resolver in an outage does. 30 sequential
// POSTs to a name it cannot resolve take at most 3 times as long as 30 to
// a loopback partner, each is acknowledged with an id, and the name was
// asked of the resolver (the requests did meet DNS, and did not wait on
// it).
func TestDoorNeverWaitsForDNS(t *testing.T) {
	t.Parallel()
	// A blackhole resolver on a loopback address of its own (all of
	// 127.0.0.0/8 is loopback), so that no other test's port 53 is taken.
	dns, err := net.ListenPacket("udp", "127.83.21.7:53")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dns.Close() })
	var queries atomic.Int64
	go func() {
		buf := make([]byte, 1500)
		for {
			if _, _, err := dns.ReadFrom(buf); err != nil {
				return
			}
			queries.Add(1)
		}
	}()

	rc := NewReceiver(t)
	h := &Hookpace{t: t, Dir: t.TempDir()}
	resolv := filepath.Join(h.Dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 127.83.21.7\noptions timeout:5 attempts:2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.prefix = append(append([]string{"unshare"}, unshareMount()...),
		"sh", "-c", `mount --bind "$0" /etc/resolv.conf && exec "$@"`, resolv)
	h.Config = filepath.Join(h.Dir, "hookpace.yaml")
	writeConfig(t, h.Config, "127.0.0.1:0", "127.0.0.1:0", filepath.Join(h.Dir, "spool"), `
egress: {allow: ["127.0.0.0/8"]}
`)
	h.start()
	t.Cleanup(func() { h.Kill() })

	c := h.Client()
	c.Timeout = 3 * time.Second // the resolver's 5 s timeout would show as an error
	burst := func(target string) time.Duration {
		start := time.Now()
		for i := range 30 {
			code, id := h.Post(c, fmt.Sprintf("%s/%d", target, i), []byte(`{"n":1}`), nil)
			if code != http.StatusAccepted || id == "" {
				t.Fatalf("POST %s: %d, id %q; want 202 with an id", target, code, id)
			}
		}
		return time.Since(start)
	}
	burst(rc.URL + "/warm") // connections and the spool warm
	// Three rounds, each with a name not seen before; the medians are
	// compared, so that one slow moment of a busy machine decides nothing.
	var loops, names []time.Duration
	for round := range 3 {
		loops = append(loops, burst(fmt.Sprintf("%s/hook%d", rc.URL, round)))
		names = append(names, burst(fmt.Sprintf("http://q%d.partner.example/hook", round+1)))
	}
	slices.Sort(loops)
	slices.Sort(names)
	loop, unresolved := loops[1], names[1]
	t.Logf("30 POSTs: loopback partner %v, a name that does not resolve %v (medians of 3: %.1fx); %d queries reached the resolver",
		loops, names, float64(unresolved)/float64(loop), queries.Load())
	if unresolved > 3*loop {
		t.Errorf("30 POSTs to a name that does not resolve took %v, more than 3x the %v of 30 to a loopback partner", unresolved, loop)
	}
	if queries.Load() == 0 {
		t.Errorf("no query reached hookpace's resolver: the name was not looked up")
	}
}
