package cli

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/admin"
	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/fleet"
	"github.com/hookpace/hookpace/internal/redistest"
	"github.com/hookpace/hookpace/spool"
)

// TestMsgShowFollowsTheFleet runs two replicas' admin APIs, their real
// spools, dispatchers (not started) and limiters on a real Redis: msg show, asked of a, shows a
// webhook of b's spool from b, and follows a webhook a handed off to b.
func TestMsgShowFollowsTheFleet(t *testing.T) {
	srv := redistest.Start(t)
	quiet := slog.New(slog.DiscardHandler)
	replica := func(name string) (*spool.Spool, *httptest.Server) {
		sp, err := openJournaled(spool.Options{Dir: t.TempDir(), Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sp.Close() })
		l, err := fleet.New(fleet.Options{URL: srv.URL(), KeyPrefix: "t", Replica: name, Timeout: time.Second,
			LeasePeriod: 3 * time.Second, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		// A dispatcher not started: the webhooks stay queued.
		d := deliver.New(deliver.Options{Reader: sp, Store: sp, Stats: sp, Journal: journalOf(sp), Logger: quiet,
			Policy: func(string) *deliver.Policy { return &deliver.Policy{} }})
		api := httptest.NewUnstartedServer(admin.Handler(admin.Options{Hosts: d, Spool: sp, Journal: journalOf(sp), Fleet: l}))
		l.Identify(sp.Instance(), api.Listener.Addr().String())
		l.Start()
		api.Start()
		t.Cleanup(func() { api.Close(); l.Close() })
		return sp, api
	}
	spA, apiA := replica("a")
	spB, _ := replica("b")
	add := func(sp *spool.Spool, path string) *spool.Message {
		m := &spool.Message{Host: "p.example", Method: "POST", URL: "http://p.example" + path, Body: []byte(`{}`), Enqueued: time.Now()}
		if err := sp.Append(context.Background(), m, 0); err != nil {
			t.Fatal(err)
		}
		return m
	}
	show := func(id string) string {
		var out strings.Builder
		if err := msgCmd([]string{"show", "--admin", apiA.Listener.Addr().String(), id}, &out); err != nil {
			t.Fatalf("msg show %s: %v", id, err)
		}
		return out.String()
	}

	onB := add(spB, "/on-b")
	if out := show(onB.Ref().String()); !strings.Contains(out, "(from replica b at") || !strings.Contains(out, "/on-b") {
		t.Fatalf("an id of b's spool, asked of a:\n%s", out)
	}

	gone := add(spA, "/gone")
	there := add(spB, "/gone") // as b's proxy would have queued it
	if err := spA.HandedOff(gone, "hookpace at 127.0.0.1:1 as "+there.Ref().String()); err != nil {
		t.Fatal(err)
	}
	out := show(gone.Ref().String())
	for _, want := range []string{"handed_off", "handed off to hookpace at 127.0.0.1:1 as " + there.Ref().String(), "(replica b, admin API at",
		"there:", "id        " + there.Ref().String(), "queued"} {
		if !strings.Contains(out, want) {
			t.Fatalf("a webhook handed off: no %q in\n%s", want, out)
		}
	}
}
