package credential

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// tokenEndpoint issues tokens of life, counting requests.
func tokenEndpoint(t *testing.T, life time.Duration, asked *atomic.Int64) *httptest.Server {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := asked.Add(1)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": "t" + string(rune('0'+n)), "token_type": "Bearer", "expires_in": int(life.Seconds())})
	}))
	t.Cleanup(ts.Close)
	return ts
}

func newOAuth(t *testing.T, url string) *Credentials {
	t.Helper()
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	os.WriteFile(secret, []byte("s3cret\n"), 0o600)
	c, err := New(Options{OAuth2: &OAuth2{TokenURL: url + "/token", ClientID: "id",
		ClientSecret: Secret{Name: secret}}})
	if err != nil {
		t.Fatal(err)
	}
	c.Bind(Clients{Token: http.DefaultClient})
	return c
}

// TestTokenReusedUntilAQuarterOfItsLife: a 40-second token is reused for
// 30 s (10 s early: the cap), a 2-second one for 1.5 s (a quarter early),
// and a 401 drops it.
func TestTokenReusedUntilAQuarterOfItsLife(t *testing.T) {
	for _, tc := range []struct {
		life, reuse time.Duration
	}{{40 * time.Second, 30 * time.Second}, {2 * time.Second, 1500 * time.Millisecond}} {
		var asked atomic.Int64
		c := newOAuth(t, tokenEndpoint(t, tc.life, &asked).URL)
		now := time.Now()
		c.token.now = func() time.Time { return now }
		get := func() string {
			h := http.Header{}
			if err := c.Apply(context.Background(), h); err != nil {
				t.Fatal(err)
			}
			return h.Get("Authorization")
		}
		first := get()
		now = now.Add(tc.reuse - 50*time.Millisecond)
		if get() != first || asked.Load() != 1 {
			t.Errorf("life %v: a new token before %v (asked %d)", tc.life, tc.reuse, asked.Load())
		}
		now = now.Add(100 * time.Millisecond)
		if get() == first || asked.Load() != 2 {
			t.Errorf("life %v: the token was kept past %v (asked %d)", tc.life, tc.reuse, asked.Load())
		}
		if !c.Rejected() || get() == "" || asked.Load() != 3 {
			t.Errorf("life %v: a 401 did not drop the token (asked %d)", tc.life, asked.Load())
		}
	}
}

// TestSecretFileRereadWhenChanged: a header's file, swapped as the kubelet
// swaps a Secret (a symlink renamed over), is read again; the app's own
// value stays only with keep_app_headers.
func TestSecretFileRereadWhenChanged(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "v1"), 0o755)
	os.WriteFile(filepath.Join(dir, "v1", "key"), []byte("one"), 0o600)
	os.Symlink("v1", filepath.Join(dir, "..data"))
	os.Symlink(filepath.Join("..data", "key"), filepath.Join(dir, "key"))
	a := Options{Headers: []Header{{Name: "X-Api-Key", Value: Secret{Name: filepath.Join(dir, "key")}}}}
	c, err := New(a)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"X-Api-Key": {"the app's"}}
	if c.Apply(context.Background(), h); h.Get("X-Api-Key") != "one" {
		t.Fatalf("X-Api-Key = %q, want the file's", h.Get("X-Api-Key"))
	}
	os.Mkdir(filepath.Join(dir, "v2"), 0o755)
	os.WriteFile(filepath.Join(dir, "v2", "key"), []byte("two"), 0o600)
	os.Symlink("v2", filepath.Join(dir, "..data_tmp"))
	os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data"))
	if c.Apply(context.Background(), h); h.Get("X-Api-Key") != "two" {
		t.Fatalf("after the swap, X-Api-Key = %q, want two", h.Get("X-Api-Key"))
	}
	a.KeepAppHeaders = true
	kept, _ := New(a)
	h = http.Header{"X-Api-Key": {"the app's"}}
	if kept.Apply(context.Background(), h); h.Get("X-Api-Key") != "the app's" {
		t.Errorf("keep_app_headers: X-Api-Key = %q", h.Get("X-Api-Key"))
	}
}

func TestNewNamesTheField(t *testing.T) {
	_, err := New(Options{MTLS: &MTLS{CertFile: "/nonexistent.crt", KeyFile: "/nonexistent.key", Field: `hosts["a"].auth.mtls`, Line: 7},
		Headers: []Header{{Name: "X-Key", Value: Secret{Env: true, Name: "HOOKPACE_TEST_UNSET_VAR", Field: `hosts["a"].auth.headers.X-Key.env`, Line: 9}}}})
	var e *Error
	if err == nil || !errors.As(err, &e) {
		t.Fatalf("New: %v", err)
	}
	for _, want := range []string{`hosts["a"].auth.mtls: stat /nonexistent.crt`, "HOOKPACE_TEST_UNSET_VAR is not set"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
