package telemetry

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/pacer"
	"github.com/hookpace/hookpace/spool"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// A webhook answered 500, then 200: two client spans named POST, the
// second with http.request.resend_count 1 and the first without it, as
// the HTTP semantic conventions say.
func TestClientSpansCountResends(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tel := newTelemetry(t, Options{SpanExporter: exp})
	var n atomic.Int32
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
		close(done)
	}))
	defer srv.Close()
	s, err := openJournaled(spool.Options{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pol := fastPolicy()
	d := deliver.New(deliver.Options{Reader: s, Store: s, Stats: s, Journal: journalOf(s), Policy: func(string) *deliver.Policy { return &pol },
		Client: &http.Client{Transport: tel.WrapTransport(srv.Client().Transport)}, Tracer: tel.Tracer,
		Logger: slog.New(slog.DiscardHandler)})
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	defer d.Stop(context.Background())
	u, _ := url.Parse(srv.URL)
	if err := s.Append(context.Background(), &spool.Message{Host: u.Host, Method: "POST", URL: srv.URL + "/hook",
		Header: http.Header{}, Body: []byte(`{}`), Enqueued: time.Now()}, 0); err != nil {
		t.Fatal(err)
	}
	<-done
	d.Stop(context.Background())
	var resends []any
	for _, sp := range exp.GetSpans() {
		if sp.SpanKind != trace.SpanKindClient {
			continue
		}
		if sp.Name != "POST" {
			t.Errorf("client span %q, want POST", sp.Name)
		}
		var count any = "none"
		for _, a := range sp.Attributes {
			if a.Key == "http.request.resend_count" {
				count = a.Value.AsInt64()
			}
		}
		resends = append(resends, count)
	}
	if len(resends) != 2 || resends[0] != "none" || resends[1] != int64(1) {
		t.Fatalf("client spans' http.request.resend_count %v, want [none 1]", resends)
	}
}

// fastPolicy is a host's policy for these tests: one attempt at a time,
// retries a millisecond apart.
func fastPolicy() deliver.Policy {
	return deliver.Policy{
		Limits: pacer.Limits{Rate: 100, Burst: 10, Concurrency: 1, HoldSchedule: []time.Duration{time.Second},
			MaxRetryAfter: time.Minute, BreakerFailures: 5, BreakerCooldown: time.Minute},
		Timeout: 10 * time.Second, MaxAttempts: 5, MaxAge: time.Hour,
		BackoffInitial: time.Millisecond, BackoffMax: time.Millisecond,
	}
}
