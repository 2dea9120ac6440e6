package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
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

// TestDoorPrivateAnswer: hookpace's resolver (its own resolv.conf) is a
// loopback DNS server that answers every A query with 127.0.0.1 after
// 300 ms. The first POST to the name is not held for that answer: it is
// accepted (202) and dead-lettered at delivery with the egress reason;
// once the answer is known, a POST is refused at the door (403 with the
// reason). The partner is never contacted.
func TestDoorPrivateAnswer(t *testing.T) {
	t.Parallel()
	dns, err := net.ListenPacket("udp", "127.83.21.8:53")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dns.Close() })
	go slowDNS(dns, 300*time.Millisecond)
	rc := NewReceiver(t)
	_, port, _ := net.SplitHostPort(rc.Host())
	h := &Hookpace{t: t, Dir: t.TempDir()}
	resolv := filepath.Join(h.Dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 127.83.21.8\noptions timeout:5 attempts:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.prefix = append(append([]string{"unshare"}, unshareMount()...),
		"sh", "-c", `mount --bind "$0" /etc/resolv.conf && exec "$@"`, resolv)
	h.Config = filepath.Join(h.Dir, "hookpace.yaml")
	writeConfig(t, h.Config, "127.0.0.1:0", "127.0.0.1:0", filepath.Join(h.Dir, "spool"), ``)
	h.start()
	t.Cleanup(func() { h.Kill() })
	c := h.Client()
	target := "http://inside.partner.example:" + port + "/hook"
	if status, id := h.Post(c, target+"/first", []byte(`{}`), nil); status != http.StatusAccepted || id == "" {
		t.Fatalf("the first POST, before any answer: %d, want 202", status)
	}
	Poll(t, 30*time.Second, "a refusal at the door", func() bool {
		status, _, body := PostRaw(t, c, target+"/later", []byte(`{}`), nil)
		if status == http.StatusForbidden && !strings.Contains(string(body), "refused: loopback") {
			t.Fatalf("403 %q, want the reason", body)
		}
		return status == http.StatusForbidden
	})
	var dead struct {
		Dead []struct {
			URL    string `json:"url"`
			Reason string `json:"reason"`
		} `json:"dead"`
	}
	Poll(t, 30*time.Second, "the first POST dead-lettered", func() bool {
		h.AdminJSON("/v1/dead", &dead)
		return len(dead.Dead) > 0
	})
	for _, d := range dead.Dead {
		if !strings.Contains(d.Reason, "egress refused") || !strings.Contains(d.Reason, "loopback") {
			t.Errorf("dead letter %s: reason %q, want the egress reason", d.URL, d.Reason)
		}
	}
	if n := rc.Count(nil); n != 0 {
		t.Fatalf("%d requests reached the partner", n)
	}
}

// slowDNS answers every query on c after delay: 127.0.0.1 for an A
// question, no records for any other.
func slowDNS(c net.PacketConn, delay time.Duration) {
	buf := make([]byte, 1500)
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			return
		}
		var p dnsmessage.Parser
		hdr, err := p.Start(buf[:n])
		if err != nil {
			continue
		}
		q, err := p.Question()
		if err != nil {
			continue
		}
		go func() {
			time.Sleep(delay) // the resolver's slowness is what this test is about
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: hdr.ID, Response: true, Authoritative: true})
			b.EnableCompression()
			b.StartQuestions()
			b.Question(q)
			b.StartAnswers()
			if q.Type == dnsmessage.TypeA {
				b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}, dnsmessage.AResource{A: [4]byte{127, 0, 0, 1}})
			}
			if msg, err := b.Finish(); err == nil {
				c.WriteTo(msg, from)
			}
		}()
	}
}
