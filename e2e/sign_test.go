package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The Standard Webhooks spec's test secret.
const e2eWhsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// nodeVerdict is one line of examples/node-receiver/receiver.mjs.
type nodeVerdict struct {
	WebhookID string `json:"webhook_id"`
	Status    int    `json:"status"`
	Verified  bool   `json:"verified"`
	Duplicate bool   `json:"duplicate"`
	Error     string `json:"error"`
}

// startNodeReceiver starts the example receiver, which verifies with the
// official standardwebhooks npm package, and returns its base URL and its
// verdicts so far.
func startNodeReceiver(t *testing.T, secret string) (string, func() []nodeVerdict) {
	t.Helper()
	node := exampleNode(t, "node-receiver")
	cmd := exec.Command(node, "receiver.mjs")
	cmd.Dir = filepath.Join("..", "examples", "node-receiver")
	cmd.Env = append(os.Environ(), "WEBHOOK_SECRET="+secret)
	return startExampleReceiver[nodeVerdict](t, cmd)
}

// startExampleReceiver starts an example receiver (examples/*-receiver),
// which prints "listening on URL" and then a JSON line per request, and
// returns the URL and the lines so far, decoded as V.
func startExampleReceiver[V any](t *testing.T, cmd *exec.Cmd) (string, func() []V) {
	t.Helper()
	cmd.Stderr = os.Stderr
	dieWithTest(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "listening on ") {
		t.Fatalf("%s did not start: %q %v", cmd, sc.Text(), sc.Err())
	}
	base := strings.TrimPrefix(sc.Text(), "listening on ")
	var mu sync.Mutex
	var got []V
	go func() {
		for sc.Scan() {
			var v V
			if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
				t.Errorf("%s: %q: %v", cmd, sc.Text(), err)
				continue
			}
			mu.Lock()
			got = append(got, v)
			mu.Unlock()
		}
	}()
	return base, func() []V {
		mu.Lock()
		defer mu.Unlock()
		return append([]V(nil), got...)
	}
}

// signSeen is one request as the middleman saw it.
type signSeen struct {
	id, ts, sig, hookpaceID string
	status                  int
}

// TestSignedDeliveriesVerify: hookpace signs each attempt (Standard
// Webhooks); a receiver using the standardwebhooks npm package verifies
// every one; webhook-id is the 202's X-Hookpace-Id, the same on a retry
// after a 503 and on a dead letter's replay; a body changed in transit
// fails verification.
func TestSignedDeliveriesVerify(t *testing.T) {
	t.Parallel()
	node, verdicts := startNodeReceiver(t, e2eWhsec)
	// A middleman between hookpace and the receiver: it answers 503 to
	// the first attempt of "retry", and flips one byte of "tamper"'s
	// body the first time it passes.
	var mu sync.Mutex
	seen := map[string][]signSeen{} // by body kind
	firsts := map[string]bool{}
	mid := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ev struct{ Kind string }
		json.Unmarshal(body, &ev)
		s := signSeen{id: r.Header.Get("Webhook-Id"), ts: r.Header.Get("Webhook-Timestamp"),
			sig: r.Header.Get("Webhook-Signature"), hookpaceID: r.Header.Get("X-Hookpace-Id")}
		mu.Lock()
		first := !firsts[s.id]
		firsts[s.id] = true
		mu.Unlock()
		switch {
		case ev.Kind == "retry" && first:
			s.status = http.StatusServiceUnavailable
		case ev.Kind == "tamper" && first:
			body = bytes.Replace(body, []byte("tamper"), []byte("tampeR"), 1)
		}
		if s.status == 0 {
			req, _ := http.NewRequest(r.Method, node+r.URL.Path, bytes.NewReader(body))
			req.Header = r.Header.Clone()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				s.status = http.StatusBadGateway
			} else {
				s.status = resp.StatusCode
				resp.Body.Close()
			}
		}
		mu.Lock()
		seen[ev.Kind] = append(seen[ev.Kind], s)
		mu.Unlock()
		w.WriteHeader(s.status)
	}))
	t.Cleanup(mid.Close)
	host := strings.TrimPrefix(mid.URL, "http://")

	secret := filepath.Join(t.TempDir(), "whsec")
	if err := os.WriteFile(secret, []byte(e2eWhsec+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
defaults:
  rate: 100/s
  backoff_initial: 100ms
  backoff_max: 200ms
hosts:
  %q:
    sign: {scheme: standard-webhooks, secret_file: %s}
`, host, secret))
	c := hp.Client()
	ids := map[string]string{} // kind -> the 202's X-Hookpace-Id
	const plain = 20
	for i := range plain + 2 {
		kind := fmt.Sprintf("plain-%d", i)
		switch i {
		case plain:
			kind = "retry"
		case plain + 1:
			kind = "tamper"
		}
		status, id := hp.Post(c, mid.URL+"/hooks", []byte(fmt.Sprintf(`{"kind": %q, "n": %d}`, kind, i)), http.Header{"Content-Type": {"application/json"}})
		if status != http.StatusAccepted || id == "" {
			t.Fatalf("POST %s: %d id %q", kind, status, id)
		}
		ids[kind] = id
	}
	Poll(t, 20*time.Second, "every webhook answered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, ss := range seen {
			for _, s := range ss {
				if s.status == http.StatusNoContent || s.status == http.StatusBadRequest {
					n++
				}
			}
		}
		return n == plain+2
	})
	mu.Lock()
	for kind, id := range ids {
		ss := seen[kind]
		for _, s := range ss {
			if s.id != id || s.hookpaceID != id || s.ts == "" || !strings.HasPrefix(s.sig, "v1,") {
				t.Errorf("%s: saw webhook-id %q X-Hookpace-Id %q timestamp %q signature %q, want the 202's id %s, signed", kind, s.id, s.hookpaceID, s.ts, s.sig, id)
			}
		}
		want := []int{http.StatusNoContent}
		switch kind {
		case "retry":
			want = []int{http.StatusServiceUnavailable, http.StatusNoContent}
		case "tamper":
			want = []int{http.StatusBadRequest}
		}
		if got := statuses(ss); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: statuses %v, want %v", kind, got, want)
		}
	}
	mu.Unlock()
	// The receiver prints its verdict after it answers, and another
	// goroutine reads it: every answer's verdict, then the check.
	Poll(t, 20*time.Second, "a verdict for every webhook the receiver answered", func() bool {
		return len(verdicts()) >= plain+2 // the middleman answered the first 503 itself
	})
	var bad []nodeVerdict
	for _, v := range verdicts() {
		if !v.Verified || v.Duplicate {
			bad = append(bad, v)
		}
	}
	if len(bad) != 1 || bad[0].WebhookID != ids["tamper"] || bad[0].Verified {
		t.Errorf("node receiver refused %+v, want only the tampered webhook %s", bad, ids["tamper"])
	}

	// The tampered webhook got 400: a dead letter. Replayed (no longer
	// tampered), it verifies, under the id of its 202. hookpace buries it
	// a moment after the middleman has answered.
	Poll(t, 20*time.Second, "the tampered webhook a dead letter", func() bool {
		_, dead := failDeadList(t, hp)
		return slices.ContainsFunc(dead, func(d failDeadLetter) bool { return d.ID == ids["tamper"] })
	})
	if out, err := hp.CLI("dead", "replay", ids["tamper"]); err != nil || !strings.Contains(out, "replayed 1") {
		t.Fatalf("dead replay %s: %v\n%s", ids["tamper"], err, out)
	}
	Poll(t, 20*time.Second, "the replay verified", func() bool {
		for _, v := range verdicts() {
			if v.WebhookID == ids["tamper"] && v.Verified {
				return true
			}
		}
		return false
	})
}

func statuses(ss []signSeen) []int {
	var out []int
	for _, s := range ss {
		out = append(out, s.status)
	}
	return out
}

// TestReadmeSigningSnippet: the Node receiver in docs/signing.md is
// lines of examples/node-receiver/receiver.mjs, in order.
func TestReadmeSigningSnippet(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../docs/signing.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range []struct{ file, lang string }{
		{"examples/node-receiver/receiver.mjs", "js"},
		{"examples/python-receiver/receiver.py", "python"},
	} {
		marker := "<!-- example: " + ex.file + " -->\n```" + ex.lang + "\n"
		i := strings.Index(string(readme), marker)
		if i < 0 {
			t.Fatalf("README has no marked snippet of %s", ex.file)
		}
		snippet := string(readme[i+len(marker):])
		snippet = snippet[:strings.Index(snippet, "```")]
		src, err := os.ReadFile("../" + ex.file)
		if err != nil {
			t.Fatal(err)
		}
		lines, at := strings.Split(string(src), "\n"), 0
		for _, want := range strings.Split(snippet, "\n") {
			if want = strings.TrimSpace(want); want == "" {
				continue
			}
			for at < len(lines) && strings.TrimSpace(lines[at]) != want {
				at++
			}
			if at == len(lines) {
				t.Fatalf("README snippet line %q is not in %s (in this order)", want, ex.file)
			}
			at++
		}
	}
}
