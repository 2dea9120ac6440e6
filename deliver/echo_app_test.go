package deliver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/journal"
	"github.com/hookpace/hookpace/rewrite"
	"github.com/hookpace/hookpace/spool"
)

// A partner that echoes its request: the values of the app's headers the
// journal hides (X-Jwt), of what rewrite.headers.set adds, and a bearer
// token's part after its scheme, are not in the journal's stored answer,
// as written or JSON-escaped, nor in the host's last error; a header the
// journal shows (X-Request-Id) and a short value stay as they were.
func TestEchoedAppSecretsScrubbed(t *testing.T) {
	const jwt, set, bearer = `eyJhbGciOi."jwt"/Echo4Tq`, "set-Echo8Kd2Lx0", "tok-App3Rw6Zq1"
	partner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("X-Echo-Jwt", r.Header.Get("X-Jwt"))
		w.WriteHeader(http.StatusInternalServerError)
		b, _ := json.Marshal(map[string]string{"jwt": r.Header.Get("X-Jwt"), "set": r.Header.Get("X-Partner-Token"),
			"token": strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), "rid": r.Header.Get("X-Request-Id"),
			"short": r.Header.Get("X-Short")})
		fmt.Fprintf(w, "raw jwt=%s %s", r.Header.Get("X-Jwt"), b)
	}))
	defer partner.Close()

	s, err := openJournaledWith(spool.Options{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)},
		journal.Options{ResponseBody: 1 << 10, Retain: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	q := &signalQueue{Spool: s, deleted: make(chan *spool.Message, 10), buried: make(chan string, 10)}
	pol := policy(100, 10, 1)
	pol.MaxAttempts = 1
	pol.Rewrite = &rewrite.Headers{Set: []rewrite.Header{{Name: "X-Partner-Token", Value: set}}}
	d := New(Options{Reader: q, Store: q, Stats: q, Journal: journalOf(q.Spool), Policy: fixed(pol),
		Client: &http.Client{}, Logger: slog.New(slog.DiscardHandler)})
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		d.Stop(context.Background())
		s.Close()
	}()
	u, _ := url.Parse(partner.URL + "/hook")
	m := &spool.Message{Host: u.Host, Method: "POST", URL: u.String(), Body: []byte(`{}`), Enqueued: time.Now(),
		Header: http.Header{"X-Jwt": {jwt}, "Authorization": {"Bearer " + bearer}, "X-Request-Id": {"req-Visible77"}, "X-Short": {"abc"}}}
	if err := q.Append(context.Background(), m, 0); err != nil {
		t.Fatal(err)
	}
	<-q.buried
	v, err := journalOf(q.Spool).Lookup(spool.Ref{Seq: m.ID})
	if err != nil || len(v.Attempts) != 1 {
		t.Fatalf("%+v %v", v, err)
	}
	a := v.Attempts[0]
	kept := string(a.Body) + fmt.Sprint(a.Header) + a.Error + v.Entry.Reason
	for _, secret := range []string{"Echo4Tq", set, bearer} {
		if strings.Contains(kept, secret) {
			t.Errorf("the journal keeps %q: %s", secret, kept)
		}
	}
	for _, shown := range []string{"req-Visible77", `"short":"abc"`, "raw jwt=" + spool.Redacted, `"jwt":"` + spool.Redacted + `"`} {
		if !strings.Contains(string(a.Body), shown) {
			t.Errorf("the journal's answer lacks %q: %s", shown, a.Body)
		}
	}
	for _, hs := range d.Hosts() {
		if strings.Contains(hs.LastError, "Echo4Tq") {
			t.Errorf("last error %q", hs.LastError)
		}
	}
}
