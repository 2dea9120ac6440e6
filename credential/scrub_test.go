package credential

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A token endpoint that refuses and echoes its request (form and
// Authorization header): the client secret, as sent in either place, is
// masked in the error an attempt gets and in the host's status.
func TestTokenEndpointEchoScrubbed(t *testing.T) {
	const secret = "cs+Echo/9Zq=8v2L0pW9xT3k" // characters that URL and base64 encodings change
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":"invalid_request","echo":{"authorization":%q,"body":%q}}`, r.Header.Get("Authorization"), b)
	}))
	defer ts.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "secret")
	os.WriteFile(file, []byte(secret), 0o600)
	c, err := New(Options{OAuth2: &OAuth2{TokenURL: ts.URL, ClientID: "hook pace", ClientSecret: Secret{Name: file}}})
	if err != nil {
		t.Fatal(err)
	}
	c.Bind(Clients{Token: &http.Client{}})
	basic := base64.StdEncoding.EncodeToString([]byte(url.QueryEscape("hook pace") + ":" + url.QueryEscape(secret)))
	for range 2 { // oauth2 tries the header, then the form
		err := c.Apply(context.Background(), http.Header{})
		if err == nil {
			t.Fatal("a refused token request applied")
		}
		shown := err.Error() + " | " + c.Status().LastError
		if !strings.Contains(shown, "400 Bad Request") || !strings.Contains(shown, Masked) {
			t.Errorf("error and status %q: want the status and %s", shown, Masked)
		}
		for _, form := range []string{secret, url.QueryEscape(secret), basic, "Echo"} {
			if strings.Contains(shown, form) {
				t.Errorf("error and status show %q: %s", form, shown)
			}
		}
	}
}

func TestScrubForms(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "key")
	os.WriteFile(file, []byte("k3y/with+chars"), 0o600)
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("abc"), 0o600)
	c, err := New(Options{Headers: []Header{{Name: "X-Api-Key", Value: Secret{Name: file}}, {Name: "X-Short", Value: Secret{Name: short}}}})
	if err != nil {
		t.Fatal(err)
	}
	in := "raw k3y/with+chars q k3y%2Fwith%2Bchars b64 " + base64.StdEncoding.EncodeToString([]byte("k3y/with+chars")) + " abc"
	want := "raw [redacted] q [redacted] b64 [redacted] abc" // too short to be scrubbed: abc
	if got := c.Scrub(in); got != want {
		t.Errorf("Scrub(%q) = %q, want %q", in, got, want)
	}
	var none *Credentials
	if none.Scrub(in) != in {
		t.Error("nil credentials scrubbed")
	}
}
