package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/server"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

const (
	traceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	parentSpan  = "00f067aa0ba902b7"
	traceparent = "00-" + traceID + "-" + parentSpan + "-01"
)

// TestTraceContinuesThroughSpool runs hookpace in process with an
// in-memory span exporter (the config's exporter stays "none": the
// override must win) and follows one webhook's trace from the app, through
// the spool, to the receiver.
func TestTraceContinuesThroughSpool(t *testing.T) {
	got := make(chan string, 1)
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- r.Header.Get("Traceparent"):
		default:
		}
	}))
	defer rc.Close()

	dir := t.TempDir()
	path := filepath.Join(dir, "hookpace.yaml")
	yaml := fmt.Sprintf(`listen: 127.0.0.1:0
admin: 127.0.0.1:0
spool:
  dir: %s
egress:
  allow: ["127.0.0.0/8"]
telemetry:
  traces:
    exporter: none
`, filepath.Join(dir, "spool"))
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(path, []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "hookpace.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("hookpace log:\n%s", b)
		}
	})

	exp := tracetest.NewInMemoryExporter()
	ready := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- server.Run(ctx, server.Options{
			Config:       cfg,
			SpanExporter: exp,
			LogOutput:    logf,
			Ready:        func(proxyAddr, _ string) { ready <- proxyAddr },
		})
	}()
	var proxyAddr string
	select {
	case proxyAddr = <-ready:
	case err := <-done:
		t.Fatalf("Run returned before ready: %v", err)
	case <-time.After(15 * time.Second):
		t.Fatal("hookpace not ready after 15s")
	}

	pu, _ := url.Parse("http://" + proxyAddr)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	req, _ := http.NewRequest(http.MethodPost, rc.URL+"/hook", strings.NewReader(`{"traced":true}`))
	req.Header.Set("Traceparent", traceparent)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d, want 202", resp.StatusCode)
	}

	var atReceiver string
	select {
	case atReceiver = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("webhook not delivered within 10s")
	}
	if parts := strings.Split(atReceiver, "-"); len(parts) != 4 || parts[1] != traceID {
		t.Fatalf("receiver got traceparent %q, want trace id %s", atReceiver, traceID)
	}

	// The deliver span ends once hookpace has read the answer, just after
	// the receiver saw the request.
	byName := map[string]tracetest.SpanStub{}
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, s := range exp.GetSpans() {
			byName[s.Name] = s
		}
		// The attempt's CONSUMER span ends last, just after hookpace.deliver.
		if _, ok := byName["process "+strings.TrimPrefix(rc.URL, "http://")]; ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no process span after 10s; spans: %v", names(exp.GetSpans()))
		}
		time.Sleep(10 * time.Millisecond)
	}
	ingest, ok := byName["hookpace.ingest"]
	if !ok {
		t.Fatalf("no hookpace.ingest span; spans: %v", names(exp.GetSpans()))
	}
	deliver := byName["hookpace.deliver"]
	for _, s := range []tracetest.SpanStub{ingest, deliver} {
		if got := s.SpanContext.TraceID().String(); got != traceID {
			t.Errorf("%s span trace id %s, want %s", s.Name, got, traceID)
		}
	}
	if got := ingest.Parent.SpanID().String(); got != parentSpan || !ingest.Parent.IsRemote() {
		t.Errorf("ingest span's parent %s (remote %v), want the app's span %s", got, ingest.Parent.IsRemote(), parentSpan)
	}
	// The messaging view: ingest -> PRODUCER "send <host>" (ended once
	// stored) -> CONSUMER "process <host>" (the attempt, linked to the
	// producer; the gap between them is the spool's wait) -> deliver.
	host := strings.TrimPrefix(rc.URL, "http://")
	producer, consumer := byName["send "+host], byName["process "+host]
	if producer.SpanKind != trace.SpanKindProducer || producer.Parent.SpanID() != ingest.SpanContext.SpanID() {
		t.Errorf("send %s: kind %v, parent %s; want a PRODUCER child of the ingest span %s; spans: %v",
			host, producer.SpanKind, producer.Parent.SpanID(), ingest.SpanContext.SpanID(), names(exp.GetSpans()))
	}
	if consumer.SpanKind != trace.SpanKindConsumer || consumer.Parent.SpanID() != producer.SpanContext.SpanID() ||
		len(consumer.Links) != 1 || consumer.Links[0].SpanContext.SpanID() != producer.SpanContext.SpanID() {
		t.Errorf("process %s: kind %v, parent %s, links %v; want a CONSUMER child of and linked to the producer %s: the trace does not continue through the spool",
			host, consumer.SpanKind, consumer.Parent.SpanID(), consumer.Links, producer.SpanContext.SpanID())
	}
	want := map[string]string{"messaging.system": "hookpace", "messaging.destination.name": host}
	for _, sp := range []tracetest.SpanStub{producer, consumer} {
		got := map[string]string{}
		for _, a := range sp.Attributes {
			got[string(a.Key)] = a.Value.String()
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s=%q, want %q", sp.Name, k, got[k], v)
			}
		}
		if op := map[trace.SpanKind]string{trace.SpanKindProducer: "send", trace.SpanKindConsumer: "process"}[sp.SpanKind]; got["messaging.operation.type"] != op {
			t.Errorf("%s: messaging.operation.type=%q, want %q", sp.Name, got["messaging.operation.type"], op)
		}
	}
	if deliver.Parent.SpanID() != consumer.SpanContext.SpanID() {
		t.Errorf("deliver span's parent %s, want the consumer span %s", deliver.Parent.SpanID(), consumer.SpanContext.SpanID())
	}
	// The receiver's parent is the HTTP client span inside hookpace.deliver.
	receiverParent := strings.Split(atReceiver, "-")[2]
	var httpSpan *tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.SpanContext.SpanID().String() == receiverParent {
			httpSpan = &s
		}
	}
	if httpSpan == nil || httpSpan.Parent.SpanID() != deliver.SpanContext.SpanID() {
		t.Errorf("receiver's parent span %s is not a child of hookpace.deliver; spans: %v", receiverParent, names(exp.GetSpans()))
	} else {
		t.Logf("trace %s: app %s -> %s %s -> %s (%v) -> gap %v -> %s -> %s %s -> %s %s -> receiver", traceID, parentSpan,
			ingest.Name, ingest.SpanContext.SpanID(), producer.Name, producer.EndTime.Sub(producer.StartTime),
			consumer.StartTime.Sub(producer.EndTime), consumer.Name, deliver.Name, deliver.SpanContext.SpanID(), httpSpan.Name, httpSpan.SpanContext.SpanID())
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v after cancel, want nil", err)
		}
	case <-time.After(35 * time.Second):
		t.Fatal("Run did not return within the shutdown timeout after cancel")
	}
}

func names(spans tracetest.SpanStubs) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name
	}
	return out
}
