package deliver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hookpace/hookpace/sign"
	"github.com/hookpace/hookpace/spool"
)

// A webhook an inbound route's door took in is signed by that route's
// signer alone (none for a route without one), and anything else by the
// host's; the door's mark never reaches the receiver.
func TestDoorSigners(t *testing.T) {
	signer := func(key, prefix string) *sign.Signer {
		s, err := sign.New(sign.Options{Scheme: sign.StandardWebhooks, Secrets: [][]byte{[]byte(key)}, Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	host, routeA := signer("host-key", ""), signer("route-a-key", "Hookpace-")
	got := make(chan http.Header, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() }))
	defer srv.Close()
	pol := policy(100, 10, 1)
	pol.Signer, pol.Doors = host, map[string]*sign.Signer{"a": routeA, "c": nil}
	_, q := journalSetup(t, pol)
	for _, mark := range []string{"a", "c", "gone", ""} {
		m := &spool.Message{Host: srv.Listener.Addr().String(), Method: "POST", URL: srv.URL + "/hook", Body: []byte(`{}`),
			Enqueued: time.Now(), Header: http.Header{}}
		if mark != "" {
			m.Header.Set(spool.HeaderDoor, mark)
		}
		if err := q.Append(context.Background(), m, 0); err != nil {
			t.Fatal(err)
		}
		h := <-got
		if v := h.Get(spool.HeaderDoor); v != "" {
			t.Errorf("mark %q: the receiver got %s: %s", mark, spool.HeaderDoor, v)
		}
		ours, hosts := h.Get("Hookpace-Webhook-Signature") != "", h.Get("Webhook-Signature") != ""
		want := map[string][2]bool{"a": {true, false}, "c": {false, false}, "gone": {false, false}, "": {false, true}}[mark]
		if ours != want[0] || hosts != want[1] {
			t.Errorf("mark %q: route signature %v, host signature %v; want %v, %v", mark, ours, hosts, want[0], want[1])
		}
	}
}
