package admin

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// TestMessageEntryFields: a webhook with a secret header, a lane and a
// coalesce key, whose content a later one replaced, shows all of them in
// GET /v1/messages/{id} and on its page, the secret redacted; a list
// leaves the headers out.
func TestMessageEntryFields(t *testing.T) {
	sp := emptySpool(t)
	api := httptest.NewServer(Handler(Options{Hosts: manyHosts(nil), Spool: sp, Journal: journalOf(sp)}))
	defer api.Close()
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	add := func(body string, n int) *spool.Message {
		m := &spool.Message{Host: "p.example", Method: "POST", URL: "http://p.example/hook", Body: []byte(body),
			Header:   http.Header{"Authorization": {"Bearer s3cret"}, "Content-Type": {"application/json"}},
			Enqueued: at.Add(time.Duration(n) * time.Second), Fairness: "tenant-1", Priority: spool.PriorityHigh,
			NotBefore: at.Add(time.Hour)}
		if _, err := sp.AppendKeys(context.Background(), m, 0, spool.Keys{Coalesce: "order-7"}); err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := add(`{"v":1}`, 0)
	add(`{"v":2}`, 5)

	var got map[string]any
	raw := get(t, api.URL+"/v1/messages/"+m.Ref().String())
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		t.Fatal(err)
	}
	hdr, _ := got["request_headers"].(map[string]any)
	want := map[string]any{"coalesce_key": "order-7", "replaced": 1.0, "replaced_at": "2026-11-25T10:00:05Z",
		"fairness_key": "tenant-1", "priority": "high", "not_before": "2026-11-25T11:00:00Z", "accepted_at": "2026-11-25T10:00:00Z"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %v, want %v", k, got[k], v)
		}
	}
	if a, _ := hdr["Authorization"].([]any); len(a) != 1 || a[0] != spool.Redacted {
		t.Errorf("request_headers %v", got["request_headers"])
	}

	page := get(t, api.URL+"/messages/"+m.Ref().String())
	for _, w := range []string{"order-7", "content replaced 1 time,", "fairness key tenant-1", "priority high", "not before",
		"Authorization", spool.Redacted, "application/json"} {
		if !strings.Contains(page, w) {
			t.Errorf("page: no %q", w)
		}
	}
	list, err := NewClient(api.URL).Messages(context.Background(), MessageFilter{Host: "p.example"})
	if err != nil || len(list.Messages) != 1 || list.Messages[0].Coalesce != "order-7" || list.Messages[0].Header != nil {
		t.Fatalf("list %+v %v", list, err)
	}
	for _, body := range []string{page, raw} {
		if strings.Contains(body, "s3cret") {
			t.Fatal("a secret shown")
		}
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}
