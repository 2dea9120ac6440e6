// transparentapp is an app as capture mode and proxy mode meet it: a Go
// client making the calls of TestCaptureTransparent and printing one line
// per call, "name result", that a direct run and a run through hookpace
// must print alike. Its HTTP clients read the proxy variables, as
// net/http's default transport does (in capture mode there are none);
// its WebSocket and raw TCP dialers do not, as x/net/websocket and net
// do not. With "webhooks", it then posts seven signed webhooks
// and prints "webhook URL status id"; with "quic", it sends a UDP
// datagram to port 443 instead and prints the answer.
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"golang.org/x/net/websocket"
)

func main() {
	certFile, keyFile := os.Args[1], os.Args[2]
	client := &http.Client{Timeout: 120 * time.Second}
	issuer := func(r *http.Response) string {
		if r.TLS == nil {
			return "plain"
		}
		return r.TLS.PeerCertificates[0].Issuer.CommonName
	}
	body := func(r *http.Response, err error) (string, error) {
		if err != nil {
			return "", err
		}
		defer r.Body.Close()
		b, err := io.ReadAll(r.Body)
		return fmt.Sprintf("%d %s %q via %s", r.StatusCode, r.Proto, b, issuer(r)), err
	}
	run := func(name string, f func() (string, error)) {
		s, err := f()
		if err != nil {
			s = "FAIL " + err.Error()
		}
		fmt.Printf("%s %s\n", name, s)
	}
	if len(os.Args) > 3 && os.Args[3] == "quic" {
		run("udp-443", func() (string, error) {
			c, err := net.Dial("udp", "stream.hooks.test:443")
			if err != nil {
				return "", err
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Write([]byte("quic?")); err != nil {
				return "", err
			}
			b := make([]byte, 64)
			n, err := c.Read(b)
			return string(b[:n]), err
		})
		return
	}
	run("internal-get", func() (string, error) { return body(client.Get("http://billing.corp.test/get")) })
	run("internal-post", func() (string, error) {
		return body(client.Post("http://billing.corp.test/charge", "text/plain", strings.NewReader("amount=100")))
	})
	run("internal-https", func() (string, error) { return body(client.Get("https://billing.corp.test/get")) })
	run("mtls", func() (string, error) {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return "", err
		}
		c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}}
		return body(c.Get("https://mtls.hooks.test/"))
	})
	h2 := &http.Transport{Proxy: http.ProxyFromEnvironment}
	h2.Protocols = new(http.Protocols)
	h2.Protocols.SetHTTP2(true)
	h2c := &http.Client{Timeout: 30 * time.Second, Transport: h2}
	run("h2-only", func() (string, error) { return body(h2c.Get("https://h2.hooks.test/")) })
	run("grpc-trailers", func() (string, error) {
		req, _ := http.NewRequest(http.MethodPost, "https://h2.hooks.test/grpc", bytes.NewReader([]byte{0, 0, 0, 0, 2, 8, 1}))
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("TE", "trailers")
		r, err := h2c.Do(req)
		if err != nil {
			return "", err
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return fmt.Sprintf("%s %x grpc-status=%q grpc-message=%q", r.Proto, b, r.Trailer.Get("Grpc-Status"), r.Trailer.Get("Grpc-Message")), nil
	})
	run("websocket", func() (string, error) {
		cfg, err := websocket.NewConfig("wss://stream.hooks.test/ws", "https://stream.hooks.test/")
		if err != nil {
			return "", err
		}
		pool, _ := x509.SystemCertPool()
		cfg.TlsConfig = &tls.Config{RootCAs: pool, ServerName: "stream.hooks.test"}
		ws, err := websocket.DialConfig(cfg)
		if err != nil {
			return "", err
		}
		defer ws.Close()
		var got []string
		for _, m := range []string{"ping", "pong"} {
			if err := websocket.Message.Send(ws, m); err != nil {
				return "", err
			}
			var s string
			if err := websocket.Message.Receive(ws, &s); err != nil {
				return "", err
			}
			got = append(got, s)
		}
		return strings.Join(got, ","), nil
	})
	run("sse", func() (string, error) {
		start := time.Now()
		r, err := client.Get("https://stream.hooks.test/sse")
		if err != nil {
			return "", err
		}
		defer r.Body.Close()
		line, err := bufio.NewReader(r.Body).ReadString('\n')
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%q first-event-within-1s=%v", strings.TrimSpace(line), time.Since(start) <= time.Second), nil
	})
	run("download-50MiB", func() (string, error) {
		r, err := client.Get("https://stream.hooks.test/down")
		if err != nil {
			return "", err
		}
		defer r.Body.Close()
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		return fmt.Sprintf("%d bytes sha256 %x", n, h.Sum(nil)), err
	})
	run("upload-20MiB", func() (string, error) {
		// Intercepted: the protocol, status and body as the server's (the
		// issuer is hookpace's).
		r, err := client.Post("https://stream.hooks.test/up", "application/octet-stream", io.LimitReader(&pattern{}, 20<<20))
		if err != nil {
			return "", err
		}
		defer r.Body.Close()
		b, err := io.ReadAll(r.Body)
		return fmt.Sprintf("%s %d %q", r.Proto, r.StatusCode, b), err
	})
	run("expect-100-continue", func() (string, error) {
		req, _ := http.NewRequest(http.MethodPut, "https://stream.hooks.test/up", io.LimitReader(&pattern{}, 1<<20))
		req.Header.Set("Expect", "100-continue")
		r, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer r.Body.Close()
		b, err := io.ReadAll(r.Body)
		return fmt.Sprintf("%d %q", r.StatusCode, b), err
	})
	// Line protocols over raw TCP: the client speaks first on port 80;
	// the server does on 443 (SMTP's shape), then answers one line.
	run("raw-tcp-80", func() (string, error) {
		return rawLines("raw.hooks.test:80", false, "HELLO raw")
	})
	run("server-first-443", func() (string, error) {
		return rawLines("raw.hooks.test:443", true, "EHLO app")
	})
	if len(os.Args) < 4 || os.Args[3] != "webhooks" {
		return
	}
	for _, u := range []string{
		"https://partner4.hooks.test/hooks/1", "http://partner4.hooks.test/hooks/2", "http://203.0.113.10/hooks/3",
		"https://partner6.hooks.test/hooks/4", "http://partner6.hooks.test/hooks/5", "http://[2001:db8::10]/hooks/6",
		"https://partner4.hooks.test:8443/hooks/7",
	} {
		req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(`{"type":"invoice.paid"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Webhook-Signature", "v1,c2lnbmVk")
		r, err := client.Do(req)
		if err != nil {
			fmt.Printf("webhook %s FAIL %v\n", u, err)
			continue
		}
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		fmt.Printf("webhook %s %d %s\n", u, r.StatusCode, r.Header.Get("X-Hookpace-Id"))
	}
}

// pattern is an endless deterministic byte stream.
type pattern struct{ n int }

func (p *pattern) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = byte(p.n*7 + 3)
		p.n++
	}
	return len(b), nil
}

// rawLines dials addr, reads the server's greeting line first when
// greeted, sends line and reads one line back: what it read, trimmed,
// joined by " / ".
func rawLines(addr string, greeted bool, line string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	var got []string
	if greeted {
		g, err := br.ReadString('\n')
		if err != nil {
			return "", err
		}
		got = append(got, strings.TrimSpace(g))
	}
	fmt.Fprintf(c, "%s\n", line)
	answer, err := br.ReadString('\n')
	return strings.Join(append(got, strings.TrimSpace(answer)), " / "), err
}
