package deliver

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/hookpace/hookpace/pacer"
	"github.com/hookpace/hookpace/spool"
)

// HostGauges, what /metrics reads, says of every host what Hosts says, in
// the same order: a paused host with a backlog and one that was sent to.
func TestHostGaugesAgreeWithHosts(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }))
	defer ok.Close()
	held := httptest.NewServer(ok.Config.Handler)
	defer held.Close()
	s, err := openJournaled(spool.Options{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	q := &signalQueue{Spool: s, deleted: make(chan *spool.Message, 10), buried: make(chan string, 10)}
	seen := outcomes{ch: make(chan Outcome, 10)}
	d := New(Options{Reader: q, Store: q, Stats: q, Journal: journalOf(q.Spool), Policy: fixed(policy(100, 10, 3)),
		Client: &http.Client{}, Logger: slog.New(slog.DiscardHandler), Observer: seen})
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		d.Stop(context.Background())
		s.Close()
	}()
	heldURL, _ := url.Parse(held.URL)
	if err := d.Pause(heldURL.Host); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		appendTo(t, q, held.URL+"/hook")
	}
	appendTo(t, q, ok.URL+"/hook")
	select {
	case <-q.deleted:
	case <-time.After(30 * time.Second):
		t.Fatal("the webhook to the open host was not delivered")
	}
	// The delete settled first; the delivery ends after it, on another
	// goroutine, and is counted under the lock Hosts and HostGauges take.
	if v := <-seen.ch; v != OutcomeDelivered {
		t.Fatalf("outcome %v, want delivered", v)
	}

	status, gauges := d.Hosts(), d.HostGauges()
	if len(status) != 2 || len(gauges) != 2 {
		t.Fatalf("%d statuses, %d gauges, want 2 each", len(status), len(gauges))
	}
	for i, hs := range status {
		want := HostGauge{Host: hs.Host, Queued: hs.Queued, QueuedBytes: hs.QueuedBytes, InFlight: hs.InFlight,
			Rate: hs.Rate, Held: hs.HeldUntil != nil || hs.Paused, Paused: hs.Paused,
			BreakerOpen: hs.Breaker != pacer.BreakerClosed, ConcurrencyLimit: hs.ConcurrencyLimit, Delivered: hs.Delivered}
		if gauges[i] != want {
			t.Errorf("host %d: gauges %+v, status says %+v", i, gauges[i], want)
		}
	}
	if g := gauges[0]; g.Host != heldURL.Host || g.Queued != 3 || !g.Paused || !g.Held || g.QueuedBytes == 0 || g.ConcurrencyLimit != 3 {
		t.Errorf("the paused host first with its 3 queued: %+v", g)
	}
}
