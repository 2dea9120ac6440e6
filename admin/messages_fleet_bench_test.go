package admin

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// BenchmarkNotHere is GET /v1/messages/{id} of an id of another spool on
// a replica whose journal holds handedInScan entries: the look for a
// handed-in copy reads them all (no fleet: the 404 says so).
func BenchmarkNotHere(b *testing.B) {
	sp, err := openJournaled(spool.Options{Dir: b.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer sp.Close()
	var wg sync.WaitGroup
	slots := make(chan struct{}, 64)
	for i := range handedInScan {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			m := &spool.Message{Host: "p.example", Method: "POST", URL: fmt.Sprintf("http://p.example/%d", i),
				Body: []byte(`{}`), Enqueued: time.Now()}
			if err := sp.Append(context.Background(), m, 0); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	h := Handler(Options{Hosts: manyHosts(nil), Spool: sp, Journal: journalOf(sp)})
	path := "/v1/messages/" + spool.Ref{Spool: sp.Instance() + 1, Seq: 5}.String()
	b.ResetTimer()
	for b.Loop() {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.Host = "127.0.0.1"
		h.ServeHTTP(w, r)
		if w.Code != http.StatusNotFound {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
	}
}
