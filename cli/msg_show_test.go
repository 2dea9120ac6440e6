package cli

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/admin"
	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/spool"
)

// TestMsgShowEntry: msg show, against a real spool and admin API, says a
// webhook's coalesce key and its replacements, its lane and its request
// headers, secrets redacted.
func TestMsgShowEntry(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	sp, err := openJournaled(spool.Options{Dir: t.TempDir(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	d := deliver.New(deliver.Options{Reader: sp, Store: sp, Stats: sp, Journal: journalOf(sp), Logger: quiet, Policy: func(string) *deliver.Policy { return &deliver.Policy{} }})
	api := httptest.NewServer(admin.Handler(admin.Options{Hosts: d, Spool: sp, Journal: journalOf(sp)}))
	defer api.Close()
	var m *spool.Message
	for i := range 3 {
		u := &spool.Message{Host: "p.example", Method: "POST", URL: "http://p.example/hook", Body: []byte(`{}`), Enqueued: time.Now(),
			Header: http.Header{"Cookie": {"sid=s3cret"}, "X-Request-Id": {"r1"}}, Fairness: "tenant-1", Ordering: "acct-9"}
		if _, err := sp.AppendKeys(context.Background(), u, 0, spool.Keys{Coalesce: "order-7"}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			m = u
		}
	}
	var out strings.Builder
	if err := msgCmd([]string{"show", "--admin", api.Listener.Addr().String(), m.Ref().String()}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"coalesce  order-7 (content replaced 2 times, last at ", "lane      fairness key tenant-1, priority normal, ordering key acct-9\n",
		"headers\n  Cookie: " + spool.Redacted + "\n  X-Request-Id: r1\n"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("no %q in\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "s3cret") {
		t.Fatalf("a secret shown:\n%s", out.String())
	}
}
