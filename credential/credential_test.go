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
		if !c.Rejected(http.Header{}) || get() == "" || asked.Load() != 3 {
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

// TestStatusNeverWaitsForAFetch: while the token endpoint takes its time,
// Status answers at once, and the attempts that need a token share the
// one fetch under way.
func TestStatusNeverWaitsForAFetch(t *testing.T) {
	var asked atomic.Int64
	arrived, release := make(chan struct{}, 4), make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		arrived <- struct{}{}
		<-release
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": "slow", "token_type": "Bearer", "expires_in": 3600})
	}))
	t.Cleanup(ts.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	c := newOAuth(t, ts.URL)
	got := make(chan string, 2)
	apply := func() {
		h := http.Header{}
		if err := c.Apply(context.Background(), h); err != nil {
			got <- "error: " + err.Error()
			return
		}
		got <- h.Get("Authorization")
	}
	go apply()
	<-arrived // the first fetch is under way
	go apply()
	// The fetch holds nothing Status needs: this returns while it runs
	// (it hung until the fetch ended when the fetch held the lock).
	if st := c.Status(); st.TokenExpiry != nil || st.TokenFetch != 0 {
		t.Errorf("status during the first fetch: %+v, want no token and no fetch yet", st)
	}
	close(release)
	for range 2 {
		if a := <-got; a != "Bearer slow" {
			t.Errorf("Authorization = %q, want Bearer slow", a)
		}
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("the token endpoint was asked %d times, want once for both attempts", n)
	}
	if st := c.Status(); st.TokenExpiry == nil || st.TokenFetch != 1 {
		t.Errorf("status after the fetch: %+v", st)
	}
}

// TestTokenExpiredOnArrivalIsAFailure: a token issued with expires_in 0
// or less is no token: Apply fails (the attempt holds the host, as for
// any token failure) and the status says why.
func TestTokenExpiredOnArrivalIsAFailure(t *testing.T) {
	for _, expires := range []any{0, -30, "0"} {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"access_token": "stale", "token_type": "Bearer", "expires_in": expires})
		}))
		c := newOAuth(t, ts.URL)
		err := c.Apply(context.Background(), http.Header{})
		if err == nil || !strings.Contains(err.Error(), "expired on arrival") {
			t.Errorf("expires_in %v: Apply = %v, want a token endpoint failure", expires, err)
		}
		if st := c.Status(); !strings.Contains(st.LastError, "expired on arrival") || st.TokenExpiry != nil {
			t.Errorf("expires_in %v: status %+v", expires, st)
		}
		ts.Close()
	}
	var asked atomic.Int64
	c := newOAuth(t, tokenEndpoint(t, time.Hour, &asked).URL)
	if err := c.Apply(context.Background(), http.Header{}); err != nil {
		t.Errorf("a token valid for an hour: %v", err)
	}
}
