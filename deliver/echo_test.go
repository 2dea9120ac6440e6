package deliver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/credential"
	"github.com/hookpace/hookpace/journal"
	"github.com/hookpace/hookpace/spool"
)

// A partner that echoes its request: the API key and the bearer token
// hookpace set never reach the journal, whole or cut by its limit, nor the
// host's last error; the partner got them.
func TestEchoedCredentialsScrubbed(t *testing.T) {
	const apiKey, token = "key-Echo7Qw3Zr9Lm", "tok-Echo5Vb8Nx2Kp"
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": token, "token_type": "Bearer", "expires_in": 3600})
	}))
	defer tokens.Close()
	got := make(chan http.Header, 10)
	partner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		got <- r.Header.Clone()
		// The first bytes put the key across the journal's 40-byte cut.
		w.Header().Set("X-Request-Id", "echo "+r.Header.Get("Authorization"))
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "you sent: ......... X-Api-Key=%s Authorization=%s", r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"))
	}))
	defer partner.Close()

	dir := t.TempDir()
	secretFile, keyFile := filepath.Join(dir, "cs"), filepath.Join(dir, "key")
	os.WriteFile(secretFile, []byte("client-secret-1"), 0o600)
	os.WriteFile(keyFile, []byte(apiKey), 0o600)
	auth, err := credential.New(credential.Options{
		OAuth2:  &credential.OAuth2{TokenURL: tokens.URL, ClientID: "hookpace", ClientSecret: credential.Secret{Name: secretFile}},
		Headers: []credential.Header{{Name: "X-Api-Key", Value: credential.Secret{Name: keyFile}}}})
	if err != nil {
		t.Fatal(err)
	}
	auth.Bind(credential.Clients{Token: &http.Client{}})

	s, err := openJournaledWith(spool.Options{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)},
		journal.Options{ResponseBody: 40, Retain: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	q := &signalQueue{Spool: s, deleted: make(chan *spool.Message, 10), buried: make(chan string, 10)}
	pol := policy(100, 10, 1)
	pol.MaxAttempts, pol.Auth = 1, auth
	d := New(Options{Reader: q, Store: q, Stats: q, Journal: journalOf(q.Spool), Policy: fixed(pol),
		Client: &http.Client{}, Logger: slog.New(slog.DiscardHandler)})
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		d.Stop(context.Background())
		s.Close()
	}()
	m := appendTo(t, q, partner.URL+"/hook")
	<-q.buried
	if h := <-got; h.Get("X-Api-Key") != apiKey || h.Get("Authorization") != "Bearer "+token {
		t.Fatalf("the partner got %v", h)
	}
	v, err := journalOf(q.Spool).Lookup(spool.Ref{Seq: m.ID})
	if err != nil || len(v.Attempts) != 1 {
		t.Fatalf("%+v %v", v, err)
	}
	a := v.Attempts[0]
	kept := string(a.Body) + fmt.Sprint(a.Header) + a.Error + v.Entry.Reason
	if !strings.HasPrefix(string(a.Body), "you sent: ......... X-Api-Key="+credential.Masked) {
		t.Errorf("journal body %q, want the key masked", a.Body)
	}
	for _, secret := range []string{apiKey[:6], token[:6]} {
		if strings.Contains(kept, secret) {
			t.Errorf("the journal keeps %q: %q", secret, kept)
		}
	}
	for _, hs := range d.Hosts() {
		if strings.Contains(hs.LastError, apiKey) || strings.Contains(hs.LastError, token) {
			t.Errorf("last error %q", hs.LastError)
		}
	}
	if s := auth.Scrub("x " + token + " " + apiKey + " y"); s != "x "+credential.Masked+" "+credential.Masked+" y" {
		t.Errorf("Scrub: %q", s)
	}
}
