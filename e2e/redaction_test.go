package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// adminText GETs an admin path and returns its body, whatever it is.
func adminText(t *testing.T, hp *Hookpace, path string) string {
	t.Helper()
	resp, err := http.Get("http://" + hp.Admin + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// everyView is what an operator can see of webhook id and its host: msg
// show, GET /v1/messages/{id}, the message list, /v1/hosts, /v1/dead, the
// status page and the log (with traces on stdout, the spans too).
func everyView(t *testing.T, hp *Hookpace, id string) map[string]string {
	t.Helper()
	show, err := hp.CLI("msg", "show", id)
	if err != nil {
		t.Fatalf("msg show: %v %s", err, show)
	}
	return map[string]string{
		"msg show":          show,
		"/v1/messages/{id}": adminText(t, hp, "/v1/messages/"+id),
		"/v1/messages":      adminText(t, hp, "/v1/messages"),
		"/v1/hosts":         adminText(t, hp, "/v1/hosts"),
		"/v1/dead":          adminText(t, hp, "/v1/dead?body=1"),
		"status page":       adminText(t, hp, "/"),
		"log":               hp.Log(),
	}
}

// TestRedactionTracesHeadersPaths: a webhook to a URL whose path and
// query hold secrets, with secrets in headers whose names say nothing
// (X-Jwt, X-Webhook-Hmac), answered first with a 500 whose Location
// carries a code: the partner gets everything; no view, the trace spans
// on stdout included, shows any of it, and the allow-listed headers show
// whole.
func TestRedactionTracesHeadersPaths(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	rc.Handle = func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			w.Header().Set("Location", "https://app.example/cb?code=LOCSECRET")
			w.Header().Set("X-Partner-Session", "SESSSECRET")
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.1"]}
telemetry: {traces: {exporter: stdout}}
journal: {redact_paths: ["127.0.0.1/services"]}
hosts:
  "%s": {backoff_initial: 50ms, backoff_max: 100ms}
`, rc.Host()))
	target := rc.URL + "/services/T1/B2/PATHSECRET?sig=QUERYSECRET"
	hdr := http.Header{"X-Jwt": {"JWTSECRET"}, "X-Webhook-Hmac": {"HMACSECRET"}, "X-Request-Id": {"req-77"},
		"Content-Type": {"application/json"}}
	code, id := hp.Post(hp.Client(), target, []byte(`{"n":1}`), hdr)
	if code != http.StatusAccepted {
		t.Fatalf("POST: %d", code)
	}
	rc.WaitFor(t, 30*time.Second, "the second attempt delivered", func(as []Arrival) bool { return Delivered2xx(as) >= 1 })
	a := rc.Arrivals()[0]
	if a.Path != "/services/T1/B2/PATHSECRET?sig=QUERYSECRET" || a.Header.Get("X-Jwt") != "JWTSECRET" {
		t.Fatalf("the partner got %s %v", a.Path, a.Header)
	}
	var views map[string]string
	Poll(t, 30*time.Second, "the delivery's span and entry", func() bool {
		views = everyView(t, hp, id)
		return strings.Contains(views["msg show"], "delivered") && strings.Count(views["log"], `"url.full"`) >= 2
	})
	for name, text := range views {
		if strings.Contains(text, "SECRET") {
			i := strings.Index(text, "SECRET")
			t.Errorf("%s shows a secret: ...%s...", name, text[max(0, i-120):min(len(text), i+40)])
		}
	}
	wantURL := "/services/REDACTED?sig=REDACTED"
	if !strings.Contains(views["log"], `"url.full":"`+rc.URL+wantURL+`"`) {
		t.Errorf("no span with url.full %s%s in\n%s", rc.URL, wantURL, views["log"])
	}
	for _, want := range []string{wantURL, "X-Request-Id: req-77", "X-Jwt: REDACTED"} {
		if !strings.Contains(views["msg show"], want) {
			t.Errorf("msg show has no %q:\n%s", want, views["msg show"])
		}
	}
	var m struct {
		Attempts []struct {
			Header map[string][]string `json:"response_headers"`
		} `json:"attempts"`
	}
	hp.AdminJSON("/v1/messages/"+id, &m)
	if len(m.Attempts) != 2 {
		t.Fatalf("attempts %+v", m.Attempts)
	}
	if h := http.Header(m.Attempts[0].Header); h.Get("Location") != "https://app.example/cb?code=REDACTED" ||
		h.Get("X-Partner-Session") != "REDACTED" {
		t.Errorf("the 500's headers as kept: %v", h)
	}
}

// TestEchoedCredentialsMasked: a partner that echoes the request it got
// (headers and body) and a token endpoint that refuses and echoes its
// request. The API key, the access token and the client secret (as sent:
// in the form or as a Basic credential) appear in no view; [redacted]
// stands where the partner put them.
func TestEchoedCredentialsMasked(t *testing.T) {
	t.Parallel()
	const apiKey, clientSecret = "key-EchoE2e4Rt7Yu", "cs-EchoE2e9Wq2Zx"
	var token string
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		if r.PostForm.Get("scope") == "refused" { // the other host's: echo and refuse
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":"invalid_client","echo":%q}`, r.Header.Get("Authorization")+" "+r.PostForm.Encode())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": token, "token_type": "Bearer", "expires_in": 3600})
	}))
	t.Cleanup(tokens.Close)
	token = "tok-EchoE2e3Mn8Bv"
	echo := func(w http.ResponseWriter, r *http.Request, n int) {
		w.WriteHeader(http.StatusBadRequest)
		for k, vs := range r.Header {
			fmt.Fprintf(w, "%s: %s\n", k, strings.Join(vs, ", "))
		}
	}
	partner, refused := NewReceiver(t), NewReceiver(t)
	partner.Handle = echo
	dir := t.TempDir()
	secretFile, keyFile := filepath.Join(dir, "client-secret"), filepath.Join(dir, "api-key")
	os.WriteFile(secretFile, []byte(clientSecret), 0o600)
	os.WriteFile(keyFile, []byte(apiKey), 0o600)
	// The two receivers share 127.0.0.1: the second is named localhost.
	refusedURL := strings.Replace(refused.URL, "127.0.0.1", "localhost", 1)
	refusedHost := strings.TrimPrefix(refusedURL, "http://")
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.1", "localhost"]}
hosts:
  "%s":
    max_attempts: 1
    auth:
      oauth2: {token_url: "%s/token", client_id: hookpace, client_secret_file: %s}
      headers: {X-Api-Key: {file: %s}}
  "%s":
    auth:
      oauth2: {token_url: "%s/token", client_id: hookpace, client_secret_file: %s, scopes: [refused]}
`, partner.Host(), tokens.URL, secretFile, keyFile, refusedHost, tokens.URL, secretFile))
	code, id := hp.Post(hp.Client(), partner.URL+"/hook", []byte(`{"n":1}`), nil)
	if code != http.StatusAccepted {
		t.Fatalf("POST: %d", code)
	}
	if code, _ := hp.Post(hp.Client(), refusedURL+"/hook", []byte(`{"n":2}`), nil); code != http.StatusAccepted {
		t.Fatalf("POST to the refused host: %d", code)
	}
	partner.WaitFor(t, 30*time.Second, "the echoed attempt", func(as []Arrival) bool { return len(as) == 1 && as[0].Status != 0 })
	if a := partner.Arrivals()[0]; a.Header.Get("X-Api-Key") != apiKey || a.Header.Get("Authorization") != "Bearer "+token {
		t.Fatalf("the partner got %v", a.Header)
	}
	basic := base64.StdEncoding.EncodeToString([]byte("hookpace:" + url.QueryEscape(clientSecret)))
	var views map[string]string
	Poll(t, 30*time.Second, "the dead letter and the refused token in the views", func() bool {
		views = everyView(t, hp, id)
		return strings.Contains(views["msg show"], "dead") && strings.Contains(views["/v1/hosts"], "400 Bad Request")
	})
	for name, text := range views {
		for _, secret := range []string{apiKey, token, clientSecret, basic, "EchoE2e"} {
			if i := strings.Index(text, secret); i >= 0 {
				t.Errorf("%s shows %q: ...%s...", name, secret, text[max(0, i-120):min(len(text), i+40)])
			}
		}
	}
	if !strings.Contains(views["msg show"], "X-Api-Key: [redacted]") || !strings.Contains(views["/v1/hosts"], "[redacted]") {
		t.Errorf("no [redacted] where the echoes were:\nmsg show:\n%s\n/v1/hosts: %s", views["msg show"], views["/v1/hosts"])
	}
	if len(refused.Arrivals()) != 0 {
		t.Errorf("the host without a token got %d requests", len(refused.Arrivals()))
	}
}

// TestOldRecordControlHeadersStripped: a webhook in the spool whose
// stored headers still carry hookpace's queueing headers, as a version
// before lanes wrote it (put there with the spool package while hookpace
// is down), reaches the partner after the restart without any of them.
func TestOldRecordControlHeadersStripped(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, `
egress: {allow: ["127.0.0.1"]}
`)
	hp.Kill()
	sp, err := spool.Open(spool.Options{Dir: filepath.Join(hp.Dir, "spool"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hdr := http.Header{"X-App": {"kept"}, "Content-Type": {"application/json"}}
	for _, k := range spool.ControlHeaders {
		hdr.Set(k, "from-an-old-version")
	}
	m := &spool.Message{Host: rc.Host(), Method: "POST", URL: rc.URL + "/old", Header: hdr, Body: []byte(`{"old":true}`), Enqueued: time.Now()}
	if err := sp.Append(context.Background(), m, 0); err != nil {
		t.Fatal(err)
	}
	if err := sp.Close(); err != nil {
		t.Fatal(err)
	}
	hp.Restart()
	rc.WaitFor(t, 30*time.Second, "the old record delivered", func(as []Arrival) bool { return Delivered2xx(as) == 1 })
	a := rc.Arrivals()[0]
	for k := range a.Header {
		if strings.HasPrefix(k, "Hookpace-") {
			t.Errorf("the partner got %s: %s", k, a.Header.Get(k))
		}
	}
	if a.Header.Get("X-App") != "kept" || string(a.Body) != `{"old":true}` {
		t.Errorf("the partner got %v %q", a.Header, a.Body)
	}
}
