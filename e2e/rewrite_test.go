package e2e

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	rewriteEmail = "ann.secret-7d1f@corp.example"
	rewriteCard  = "4111222233334444"
)

// rewriteBody is a webhook holding both values the partner must never
// see, among fields that must arrive as sent.
func rewriteBody(i int) []byte {
	return fmt.Appendf(nil, `{"id":"evt_%d","amount":12345678901234567890.25,"customer":{"name":"Ann","email":%q,"tier":1e3},"card":{"number":%q,"last4":"4444"},"items":[{"sku":"a"},{"sku":"b"}]}`,
		i, rewriteEmail, rewriteCard)
}

// The acceptance of the rewrite rules: headers set and removed at the
// attempt, one field dropped and one masked at ingest, every other field
// intact; neither value is in any file under the spool directory.
func TestRewriteAcceptance(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  %q:
    rewrite: {headers: {set: {X-Tenant: acme}, remove: [X-Internal-Trace]}, json: {drop: ["$.customer.email"], mask: ["$.card.number"]}}
`, rc.Host()))
	c := hp.Client()
	const n = 3
	var ids []string
	for i := range n {
		status, id := hp.Post(c, rc.URL+"/hook", rewriteBody(i), http.Header{"X-Internal-Trace": {"1"}, "Content-Type": {"application/json"},
			"X-Tenant": {"from-the-app"}})
		if status != http.StatusAccepted {
			t.Fatalf("webhook %d: status %d", i, status)
		}
		ids = append(ids, id)
	}
	// A body that is not JSON is refused, with the reason, and not stored.
	status, _, body := PostRaw(t, c, rc.URL+"/hook", []byte("email="+rewriteEmail), http.Header{"Content-Type": {"application/x-www-form-urlencoded"}})
	if status != http.StatusBadRequest || !bytes.Contains(body, []byte("not JSON")) {
		t.Errorf("non-JSON body: %d %s", status, body)
	}
	rc.WaitFor(t, 30*time.Second, "3 deliveries", func(as []Arrival) bool { return Delivered2xx(as) >= n })

	for _, a := range rc.Arrivals() {
		if a.Header.Get("X-Tenant") != "acme" || len(a.Header.Values("X-Tenant")) != 1 {
			t.Errorf("X-Tenant = %q, want acme alone", a.Header.Values("X-Tenant"))
		}
		for _, h := range []string{"X-Internal-Trace", "Hookpace-Rewrite"} {
			if _, ok := a.Header[h]; ok {
				t.Errorf("%s arrived: %v", h, a.Header)
			}
		}
		var got map[string]any
		dec := json.NewDecoder(bytes.NewReader(a.Body))
		dec.UseNumber()
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("body %s: %v", a.Body, err)
		}
		cust, _ := got["customer"].(map[string]any)
		card, _ := got["card"].(map[string]any)
		if _, ok := cust["email"]; ok || card["number"] != "[masked]" {
			t.Errorf("customer %v, card %v: want no email and the number masked", cust, card)
		}
		if cust["name"] != "Ann" || cust["tier"] != json.Number("1e3") || card["last4"] != "4444" ||
			got["amount"] != json.Number("12345678901234567890.25") || !strings.Contains(string(a.Body), `"items":[{"sku":"a"},{"sku":"b"}]`) ||
			!strings.HasPrefix(string(a.Body), `{"id":"evt_`) {
			t.Errorf("other fields changed: %s", a.Body)
		}
	}

	// The journal says which rules applied.
	out, err := hp.CLI("msg", "show", ids[0])
	if err != nil || !strings.Contains(out, "drop $.customer.email (1); mask $.card.number (1)") {
		t.Errorf("msg show: %v\n%s", err, out)
	}

	// The status page's host row shows the rules in force.
	resp, err := http.Get("http://" + hp.Admin + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := "rewrite: headers set X-Tenant: acme; headers remove X-Internal-Trace; json drop $.customer.email; json mask $.card.number"; !strings.Contains(string(page), want) {
		t.Errorf("the status page lacks %q", want)
	}

	metrics := hp.Metrics()
	for _, name := range []string{"hookpace_rewrite_webhooks_total", "hookpace_rewrite_dropped_fields_total", "hookpace_rewrite_masked_fields_total"} {
		if want := fmt.Sprintf("%s{host=%q} %d", name, rc.Host(), n); !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// Nothing under the spool directory holds either value: Badger's
	// value logs, tables and manifests, the journal, everything.
	hp.Kill()
	files, kept := 0, 0
	err = filepath.WalkDir(filepath.Join(hp.Dir, "spool"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		for _, v := range []string{rewriteEmail, rewriteCard} {
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("%s holds %q", path, v)
			}
		}
		if bytes.Contains(b, []byte(`"id":"evt_0"`)) {
			kept++
		}
		return nil
	})
	// The scan can see a body: the fields that were kept are there.
	if err != nil || files == 0 || kept == 0 {
		t.Fatalf("walked %d files, %d with a kept field: %v", files, kept, err)
	}
}

// The acceptance of v1a: each delivery's webhook-signature carries a
// v1a signature that verifies as Ed25519 over id.timestamp.body against
// the key hookpace sign public-key prints, checked by Go's crypto/ed25519
// and by Node's (OpenSSL's) implementation. The host also drops a field:
// what is signed is what leaves.
func TestSignV1aAcceptance(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  %q:
    sign: {scheme: standard-webhooks-v1a}
    rewrite: {json: {drop: ["$.customer.email"]}}
`, rc.Host()))
	out, err := exec.Command(binary, "sign", "public-key", "--config", hp.Config, "--host", rc.Host()).CombinedOutput()
	wpk := strings.TrimSpace(string(out))
	raw, derr := base64.StdEncoding.DecodeString(strings.TrimPrefix(wpk, "whpk_"))
	if err != nil || !strings.HasPrefix(wpk, "whpk_") || derr != nil || len(raw) != ed25519.PublicKeySize {
		t.Fatalf("hookpace sign public-key: %v %q", err, out)
	}
	pub := ed25519.PublicKey(raw)
	if fi, err := os.Stat(filepath.Join(hp.Dir, "spool", "sign", "ed25519.pem")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("hookpace's own key: %v %v", fi, err)
	}

	c := hp.Client()
	const n = 2
	for i := range n {
		if status, _ := hp.Post(c, rc.URL+"/hook", rewriteBody(i), http.Header{"Content-Type": {"application/json"}}); status != http.StatusAccepted {
			t.Fatalf("webhook %d: status %d", i, status)
		}
	}
	rc.WaitFor(t, 30*time.Second, "2 deliveries", func(as []Arrival) bool { return Delivered2xx(as) >= n })
	type check struct{ Msg, Sig string }
	var node []check
	for _, a := range rc.Arrivals() {
		if bytes.Contains(a.Body, []byte(rewriteEmail)) {
			t.Errorf("the dropped field arrived: %s", a.Body)
		}
		id, ts := a.Header.Get("Webhook-Id"), a.Header.Get("Webhook-Timestamp")
		sigs := strings.Fields(a.Header.Get("Webhook-Signature"))
		if id == "" || ts == "" || len(sigs) != 1 || !strings.HasPrefix(sigs[0], "v1a,") {
			t.Fatalf("headers %v", a.Header)
		}
		sig, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(sigs[0], "v1a,"))
		msg := id + "." + ts + "." + string(a.Body)
		if err != nil || !ed25519.Verify(pub, []byte(msg), sig) {
			t.Errorf("v1a signature %q does not verify over %q", sigs[0], msg)
		}
		if ed25519.Verify(pub, []byte(id+"."+ts+"."+string(rewriteBody(0))), sig) {
			t.Errorf("the signature verifies over the body as the app sent it")
		}
		node = append(node, check{Msg: msg, Sig: strings.TrimPrefix(sigs[0], "v1a,")})
	}

	// An independent Ed25519: Node's crypto, given the raw public key as
	// a JWK. It prints one true or false per signature.
	in, _ := json.Marshal(map[string]any{"x": base64.RawURLEncoding.EncodeToString(pub), "checks": node})
	script := `const c=require("crypto");let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const j=JSON.parse(s);` +
		`const k=c.createPublicKey({key:{kty:"OKP",crv:"Ed25519",x:j.x},format:"jwk"});` +
		`for(const x of j.checks)console.log(c.verify(null,Buffer.from(x.Msg),k,Buffer.from(x.Sig,"base64")));});`
	cmd := exec.Command("node", "-e", script)
	cmd.Stdin = bytes.NewReader(in)
	res, err := cmd.CombinedOutput()
	if err != nil || strings.Fields(string(res)) == nil || strings.Count(string(res), "true") != len(node) || strings.Contains(string(res), "false") {
		t.Errorf("node verification of %d signatures: %v\n%s", len(node), err, res)
	}
}

// Rules with batches, dedupe and coalescing: each batch member has had
// the rules applied, a repeat that differs only in a dropped field is a
// duplicate (dedupe sees the rewritten body), and a coalesced update
// replaces the queued webhook with its own rewritten body.
func TestRewriteBatchDedupeCoalesce(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  %q:
    batch: {max_events: 3, max_wait: 1s}
    rewrite: {json: {drop: ["$.customer.email"], mask: ["$.card.number"]}}
`, rc.Host()))
	if out, err := hp.CLI("pause", rc.Host()); err != nil {
		t.Fatalf("pause: %v %s", err, out)
	}
	c := hp.Client()
	post := func(i int, email string, h http.Header) http.Header {
		t.Helper()
		h.Set("Content-Type", "application/json")
		body := bytes.Replace(rewriteBody(i), []byte(rewriteEmail), []byte(email), 1)
		status, hdr, b := PostRaw(t, c, rc.URL+"/hook", body, h)
		if status != http.StatusAccepted {
			t.Fatalf("webhook %d: %d %s", i, status, b)
		}
		return hdr
	}
	post(0, rewriteEmail, http.Header{})
	post(1, rewriteEmail, http.Header{"Idempotency-Key": {"k1"}})
	if h := post(1, "other-"+rewriteEmail, http.Header{"Idempotency-Key": {"k1"}}); h.Get("X-Hookpace-Duplicate") != "true" {
		t.Errorf("a repeat differing only in a dropped field: %v, want a duplicate", h)
	}
	post(2, rewriteEmail, http.Header{"Hookpace-Coalesce-Key": {"c1"}})
	if h := post(3, rewriteEmail, http.Header{"Hookpace-Coalesce-Key": {"c1"}}); h.Get("X-Hookpace-Coalesced") != "true" {
		t.Errorf("the update: %v, want coalesced", h)
	}
	if out, err := hp.CLI("resume", rc.Host()); err != nil {
		t.Fatalf("resume: %v %s", err, out)
	}
	rc.WaitFor(t, 30*time.Second, "the batch", func(as []Arrival) bool { return Delivered2xx(as) >= 1 })
	as := rc.Arrivals()
	var members []map[string]any
	if len(as) != 1 || json.Unmarshal(as[0].Body, &members) != nil || len(members) != 3 {
		t.Fatalf("%d requests; first body %s: want one batch of 3", len(as), as[0].Body)
	}
	for i, want := range []string{"evt_0", "evt_1", "evt_3"} {
		m := members[i]
		cust, _ := m["customer"].(map[string]any)
		card, _ := m["card"].(map[string]any)
		if m["id"] != want || cust["email"] != nil || cust["name"] != "Ann" || card["number"] != "[masked]" {
			t.Errorf("member %d: %v, want %s rewritten", i, m, want)
		}
	}
	if bytes.Contains(as[0].Body, []byte("corp.example")) || bytes.Contains(as[0].Body, []byte(rewriteCard)) {
		t.Errorf("a dropped or masked value arrived: %s", as[0].Body)
	}
}
