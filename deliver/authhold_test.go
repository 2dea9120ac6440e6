package deliver

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookpace/hookpace/credential"
	"github.com/hookpace/hookpace/spool"
)

// outcomes is an Observer that hands each attempt's outcome to the test.
type outcomes struct{ ch chan Outcome }

func (o outcomes) Delivery(_ context.Context, _ string, v Outcome)      { o.ch <- v }
func (outcomes) DeliveryLatency(context.Context, string, time.Duration) {}
func (outcomes) BatchWebhooks(context.Context, string, Outcome, int)    {}

// TestTokenFailuresHoldWithoutSpendingAttempts: with max_attempts 1, a
// token endpoint that issues tokens already expired, and a partner that
// answers 401 to a token fetched for the retry, each hold the host
// ("auth") and keep the webhook queued with its attempt unspent, as the
// token endpoint's own failures do; neither buries it.
func TestTokenFailuresHoldWithoutSpendingAttempts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		expires int
		partner int // what the partner answers
		fetches int64
		sent    int64
	}{
		{"expired on arrival", 0, http.StatusOK, 1, 0},
		{"401 to a fresh token", 3600, http.StatusUnauthorized, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fetches, sent atomic.Int64
			tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := fetches.Add(1)
				w.Header().Set("Content-Type", "application/json")
				json.NewEncoder(w).Encode(map[string]any{"access_token": "t" + string(rune('0'+n)), "token_type": "Bearer", "expires_in": tc.expires})
			}))
			defer tokens.Close()
			partner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				sent.Add(1)
				w.WriteHeader(tc.partner)
			}))
			defer partner.Close()
			secret := filepath.Join(t.TempDir(), "secret")
			os.WriteFile(secret, []byte("s3cret"), 0o600)
			auth, err := credential.New(credential.Options{OAuth2: &credential.OAuth2{TokenURL: tokens.URL, ClientID: "id",
				ClientSecret: credential.Secret{Name: secret}}})
			if err != nil {
				t.Fatal(err)
			}
			auth.Bind(credential.Clients{Token: &http.Client{}})
			pol := policy(100, 10, 1)
			pol.MaxAttempts = 1
			pol.Auth = auth

			s, err := openJournaled(spool.Options{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			q := &signalQueue{Spool: s, deleted: make(chan *spool.Message, 10), buried: make(chan string, 10)}
			seen := outcomes{ch: make(chan Outcome, 10)}
			d := New(Options{Reader: q, Store: q, Stats: q, Journal: journalOf(q.Spool), Policy: fixed(pol),
				Client: &http.Client{}, Logger: slog.New(slog.DiscardHandler), Observer: seen})
			if err := d.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				d.Stop(context.Background())
				s.Close()
			}()
			m := appendTo(t, q, partner.URL+"/hook")
			if v := <-seen.ch; v != OutcomeHeld {
				t.Fatalf("outcome %v, want held", v)
			}
			select {
			case why := <-q.buried:
				t.Fatalf("buried: %s", why)
			default:
			}
			if fetches.Load() != tc.fetches || sent.Load() != tc.sent {
				t.Errorf("%d tokens fetched and %d requests sent to the partner, want %d and %d", fetches.Load(), sent.Load(), tc.fetches, tc.sent)
			}
			if u := s.HostUsage(m.Host); u.Messages != 1 {
				t.Errorf("%d webhooks queued for the host, want the held one", u.Messages)
			}
			st, ok := d.Host(m.Host)
			if !ok || st.Auth == nil || st.Auth.LastError == "" && tc.expires == 0 {
				t.Errorf("the host's status does not say why: %+v", st)
			}
		})
	}
}
