package telemetry

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/spool"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Three webhooks stored under three PRODUCER spans and delivered as one
// batch: one CONSUMER span "process <host>", linked to each producer,
// with messaging.batch.message_count 3 and the messaging attributes, and
// hookpace.deliver inside it.
func TestBatchConsumerSpanLinksEachProducer(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tel := newTelemetry(t, Options{SpanExporter: exp})
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
		select {
		case <-done:
		default:
			close(done)
		}
	}))
	defer srv.Close()
	s, err := openJournaled(spool.Options{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pol := fastPolicy()
	pol.Batch = &deliver.Batch{MaxEvents: 3, MaxBytes: 1 << 20, MaxWait: time.Minute}
	u, _ := url.Parse(srv.URL)
	var producers []trace.SpanID
	for range 3 {
		ctx, producer := tel.Tracer.Start(context.Background(), "send "+u.Host, trace.WithSpanKind(trace.SpanKindProducer))
		hdr := http.Header{"Content-Type": {"application/json"}}
		propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(hdr))
		producer.End()
		producers = append(producers, producer.SpanContext().SpanID())
		if err := s.Append(context.Background(), &spool.Message{Host: u.Host, Method: "POST", URL: srv.URL + "/hook",
			Header: hdr, Body: []byte(`{}`), Enqueued: time.Now()}, 0); err != nil {
			t.Fatal(err)
		}
	}
	d := deliver.New(deliver.Options{Reader: s, Store: s, Stats: s, Journal: journalOf(s), Policy: func(string) *deliver.Policy { return &pol },
		Client: &http.Client{Transport: tel.WrapTransport(srv.Client().Transport)}, Tracer: tel.Tracer,
		Logger: slog.New(slog.DiscardHandler)})
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	<-done
	d.Stop(context.Background())

	var consumers, delivers []tracetest.SpanStub
	for _, sp := range exp.GetSpans() {
		switch {
		case sp.SpanKind == trace.SpanKindConsumer:
			consumers = append(consumers, sp)
		case sp.Name == "hookpace.deliver":
			delivers = append(delivers, sp)
		}
	}
	if len(consumers) != 1 || len(delivers) != 1 {
		t.Fatalf("%d consumer and %d hookpace.deliver spans, want one of each (one batch)", len(consumers), len(delivers))
	}
	c := consumers[0]
	var linked []trace.SpanID
	for _, l := range c.Links {
		linked = append(linked, l.SpanContext.SpanID())
	}
	slices.SortFunc(linked, func(a, b trace.SpanID) int { return slices.Compare(a[:], b[:]) })
	slices.SortFunc(producers, func(a, b trace.SpanID) int { return slices.Compare(a[:], b[:]) })
	if c.Name != "process "+u.Host || !slices.Equal(linked, producers) {
		t.Errorf("consumer %q linked to %v, want process %s linked to the producers %v", c.Name, linked, u.Host, producers)
	}
	got := map[string]string{}
	for _, a := range c.Attributes {
		got[string(a.Key)] = a.Value.String()
	}
	for k, v := range map[string]string{"messaging.system": "hookpace", "messaging.operation.type": "process",
		"messaging.destination.name": u.Host, "messaging.batch.message_count": "3"} {
		if got[k] != v {
			t.Errorf("consumer %s=%q, want %q", k, got[k], v)
		}
	}
	if delivers[0].Parent.SpanID() != c.SpanContext.SpanID() {
		t.Errorf("hookpace.deliver's parent %s, want the consumer %s", delivers[0].Parent.SpanID(), c.SpanContext.SpanID())
	}
}
