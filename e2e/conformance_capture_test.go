package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// conformanceSender is the client of the capture doors: the redirect
// captures uid 65534's connections only, so the raw requests are written
// by this program run as that uid in the namespace. It reads
// {addr, tls, server_name, ca, raws} on stdin and prints one answer a
// request, as sendRaw makes them.
const conformanceSender = `package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

type answer struct {
	Status int    ` + "`json:\"status\"`" + `
	Closed bool   ` + "`json:\"closed\"`" + `
	Err    string ` + "`json:\"err\"`" + `
	At     time.Time ` + "`json:\"at\"`" + `
}

func main() {
	var in struct {
		Addr, ServerName, CA string
		TLS                  bool
		Raws                 []string
	}
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		panic(err)
	}
	roots := x509.NewCertPool()
	if in.TLS {
		pem, err := os.ReadFile(in.CA)
		if err != nil || !roots.AppendCertsFromPEM(pem) {
			panic("reading the CA bundle")
		}
	}
	var out []answer
	for _, raw := range in.Raws {
		out = append(out, send(in.Addr, in.TLS, in.ServerName, roots, raw))
	}
	json.NewEncoder(os.Stdout).Encode(out)
}

func send(addr string, secure bool, name string, roots *x509.CertPool, raw string) answer {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return answer{Err: "dial: " + err.Error()}
	}
	if secure {
		tc := tls.Client(c, &tls.Config{RootCAs: roots, ServerName: name})
		if err := tc.Handshake(); err != nil {
			c.Close()
			return answer{Err: "handshake: " + err.Error()}
		}
		c = tc
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	go io.WriteString(c, raw)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	for err == nil && resp.StatusCode < 200 {
		resp, err = http.ReadResponse(br, nil)
	}
	if err != nil {
		return answer{Err: err.Error()}
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	a := answer{Status: resp.StatusCode, At: time.Now()}
	if resp.StatusCode >= 400 {
		c.SetReadDeadline(time.Now().Add(15 * time.Second))
		_, err := io.Copy(io.Discard, br)
		var ne net.Error
		a.Closed = !(errors.As(err, &ne) && ne.Timeout())
	}
	return a
}
`

// The conformance table at the capture listener, plain and TLS: in a
// network namespace of its own, partner.test on 203.0.113.10 (http on 80,
// https on 443), hookpace as root with capture.listen and `hookpace
// capture rules --apply` redirecting uid 65534's TCP 80 and 443 to it, and
// the raw requests written as uid 65534 with no proxy: each refused and
// the connection closed, or delivered once with exactly its body.
func TestConformanceCapture(t *testing.T) {
	t.Parallel()
	ns := newNetns(t, "partner.test")
	base, partnerCA := tlsPartner(t, "partner.test")
	secure := nsStart(t, ns, "203.0.113.10:443", base, &Receiver{})
	plain := nsStart(t, ns, "203.0.113.10:80", nil, &Receiver{})

	pub := publicDir(t)
	hp := startInNetns(t, ns, fmt.Sprintf(`
capture: {listen: "127.0.0.1:15001"}
egress: {allow: ["203.0.113.10"]}
tls: {ca_file: %s}
mitm: {public_dir: %s}
spool: {max_header_bytes: 65536}
hosts:
  "partner.test": {rate: 1000/s, burst: 100}
`, partnerCA, filepath.Join(pub, "trust")))
	if out, err := ns.exec(binary, "capture", "rules", "--to", "15001", "--exclude-uid", "0", "--apply").CombinedOutput(); err != nil {
		t.Fatalf("hookpace capture rules --apply: %v\n%s", err, out)
	}
	bundle := hookpaceCA(t, hp, "bundle")
	src := filepath.Join(pub, "confsender.go")
	if err := os.WriteFile(src, []byte(conformanceSender), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(pub, "confsender")
	if out, err := exec.Command("go", "build", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("build the sender: %v\n%s", err, out)
	}
	sender := func(addr string, secure bool) func([]string) []answer {
		return func(raws []string) []answer {
			in, _ := json.Marshal(map[string]any{"addr": addr, "tls": secure, "servername": "partner.test", "ca": bundle, "raws": raws})
			cmd := ns.asNobody(bin)
			cmd.Stdin = bytes.NewReader(in)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("the sender: %v\n%s", err, stderr.String())
			}
			var got []struct {
				Status int
				Closed bool
				Err    string
				At     time.Time
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("the sender's answers: %v\n%s", err, out)
			}
			answers := make([]answer, len(got))
			for i, g := range got {
				answers[i] = answer{status: g.Status, closed: g.Closed, err: g.Err, at: g.At}
			}
			return answers
		}
	}
	path := func(p string) string { return p }
	doors := []struct {
		name string
		d    conformanceDoor
		send func([]string) []answer
	}{
		{"capture", conformanceDoor{target: path, host: "partner.test", rc: plain}, sender("203.0.113.10:80", false)},
		{"capture-tls", conformanceDoor{target: path, host: "partner.test", rc: secure}, sender("203.0.113.10:443", true)},
	}
	for _, door := range doors {
		t.Run(door.name, func(t *testing.T) {
			t.Parallel()
			checkConformance(t, door.name, door.d, door.send)
		})
	}
}
