package e2e

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"
)

// journalMessage is the part of GET /v1/messages/{id} these tests read.
type journalMessage struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	URL      string `json:"url"`
	Position int    `json:"position"`
	Reason   string `json:"reason"`
	Attempts []struct {
		At       time.Time           `json:"at"`
		Duration float64             `json:"duration_ms"`
		Status   int                 `json:"status"`
		Error    string              `json:"error"`
		Response string              `json:"response"`
		Header   map[string][]string `json:"response_headers"`
	} `json:"attempts"`
	Error string `json:"error"`
}

func lookup(t *testing.T, hp *Hookpace, id string) journalMessage {
	t.Helper()
	var m journalMessage
	hp.AdminJSON("/v1/messages/"+url.PathEscape(id), &m)
	return m
}

// A partner
// answers 500 with a JSON body, then 200; another webhook gets 422. The
// journal gives the attempts with their statuses and the body's excerpt,
// the states delivered and dead, through the API and the CLI, and again
// after a restart. Query values and Set-Cookie never show.
func TestJournalAttemptsAcrossRestart(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	rc.Handle = func(w http.ResponseWriter, r *http.Request, n int) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/refuse"):
			w.WriteHeader(http.StatusUnprocessableEntity)
			w.Write([]byte(`{"error":"unknown customer"}`))
		case n == 1:
			w.Header().Set("Set-Cookie", "session=topsecret")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(`{"error":"db pool exhausted"}`))
		}
	}
	hp := Start(t, "egress: {allow: [\"127.0.0.0/8\"]}\ndefaults:\n  backoff_initial: 50ms\n")
	c := hp.Client()
	status, id := hp.Post(c, rc.URL+"/hook?token=s3cret", WebhookBody(1), nil)
	if status != http.StatusAccepted || len(id) != 32 {
		t.Fatalf("POST: %d, id %q", status, id)
	}
	rc.WaitFor(t, 20*time.Second, "the retry's 200", func(as []Arrival) bool { return Delivered2xx(as) == 1 })
	Poll(t, 10*time.Second, "state delivered", func() bool { return lookup(t, hp, id).State == "delivered" })
	_, dead := hp.Post(c, rc.URL+"/refuse", WebhookBody(2), nil)
	Poll(t, 10*time.Second, "state dead", func() bool { return lookup(t, hp, dead).State == "dead" })

	check := func() {
		t.Helper()
		m := lookup(t, hp, id[16:]) // the last 16 digits name it too
		if m.ID != id || m.State != "delivered" || len(m.Attempts) != 2 {
			t.Fatalf("lookup: %+v", m)
		}
		first, second := m.Attempts[0], m.Attempts[1]
		if first.Status != 500 || !strings.Contains(first.Response, "db pool exhausted") || second.Status != 200 || first.Error == "" {
			t.Fatalf("attempts: %+v", m.Attempts)
		}
		if got := first.Header["Set-Cookie"]; len(got) != 1 || got[0] != "REDACTED" {
			t.Fatalf("Set-Cookie shown as %v", got)
		}
		if strings.Contains(m.URL, "s3cret") {
			t.Fatalf("URL shows its query value: %s", m.URL)
		}
		if d := lookup(t, hp, dead); d.State != "dead" || len(d.Attempts) != 1 || d.Attempts[0].Status != 422 ||
			!strings.Contains(d.Attempts[0].Response, "unknown customer") {
			t.Fatalf("422: %+v", d)
		}
		out, err := hp.CLI("msg", "show", id)
		if err != nil || !strings.Contains(out, "delivered") || !strings.Contains(out, "db pool exhausted") || !strings.Contains(out, " 500 ") {
			t.Fatalf("msg show: %v\n%s", err, out)
		}
		if out, err := hp.CLI("msg", "list", "--host", rc.Host()); err != nil || !strings.Contains(out, id) || !strings.Contains(out, dead) {
			t.Fatalf("msg list: %v\n%s", err, out)
		}
		// --limit 1 is a page of one with a cursor; --limit 0 is all of them.
		if out, err := hp.CLI("msg", "list", "--host", rc.Host(), "--limit", "1"); err != nil ||
			strings.Contains(out, id) == strings.Contains(out, dead) || !strings.Contains(out, "more: --cursor") {
			t.Fatalf("msg list --limit 1: %v\n%s", err, out)
		}
		if out, err := hp.CLI("msg", "list", "--host", rc.Host(), "--limit", "0"); err != nil ||
			!strings.Contains(out, id) || !strings.Contains(out, dead) || strings.Contains(out, "more:") {
			t.Fatalf("msg list --limit 0: %v\n%s", err, out)
		}
		if strings.Contains(hp.Log(), "s3cret") || strings.Contains(hp.Log(), "topsecret") {
			t.Fatal("a secret reached the log")
		}
	}
	check()
	hp.Signal(syscall.SIGTERM)
	if code := hp.Wait(30 * time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	hp.Restart()
	check()
}

// The status page in headless Chromium: a host links to its webhooks, a
// webhook to its attempts with the partner's answer; a purge from the
// page asks for confirmation first.
func TestJournalPagesInBrowser(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	rc.Handle = func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(`{"error":"db pool exhausted"}`))
		}
	}
	paused := NewReceiver(t)
	hp := Start(t, "egress: {allow: [\"127.0.0.0/8\"]}\ndefaults:\n  backoff_initial: 50ms\n")
	if out, err := hp.CLI("pause", paused.Host()); err != nil {
		t.Fatalf("pause: %v\n%s", err, out)
	}
	c := hp.Client()
	_, id := hp.Post(c, rc.URL+"/hook", WebhookBody(1), nil)
	for i := range 3 {
		hp.Post(c, paused.URL+"/later", WebhookBody(i), nil)
	}
	Poll(t, 20*time.Second, "delivered", func() bool { return lookup(t, hp, id).State == "delivered" })

	b := StartBrowser(t)
	admin := "http://" + hp.Admin
	b.Navigate(admin + "/")
	click := func(selector string) {
		t.Helper()
		if err := b.TryEval(`document.querySelector(`+jsString(selector)+`).click(), true`, nil); err != nil && !errors.Is(err, errNavigated) {
			t.Fatal(err)
		}
	}
	click(`tr[data-host="` + rc.Host() + `"] a[href^="/messages"]`)
	b.WaitLoaded(func(href string) bool { return strings.Contains(href, "/messages?host=") })
	click(`#messages a[href="/messages/` + id + `"]`)
	b.WaitLoaded(func(href string) bool { return strings.HasSuffix(href, "/messages/"+id) })
	var text string
	b.Eval(`document.querySelector('#msg-state').innerText + ' | ' + document.querySelector('#attempts').innerText`, &text)
	if !strings.HasPrefix(text, "delivered") || !strings.Contains(text, "500") || !strings.Contains(text, "db pool exhausted") || !strings.Contains(text, "200") {
		t.Fatalf("attempts page: %q", text)
	}

	b.Navigate(admin + "/messages?host=" + url.QueryEscape(paused.Host()))
	click(`form[action="/ui/queue/purge"] button`)
	b.Until("the confirmation", `document.getElementById('confirm-purge') ? document.body.innerText : ''`, &text,
		func() bool { return strings.Contains(text, "(3 now)") })
	if n := hostQueued(t, hp, paused.Host()); n != 3 {
		t.Fatalf("%d queued before the confirmation", n)
	}
	click(`#confirm-purge`)
	var done string
	b.Until("the page back after the purge", `document.readyState === 'complete' && document.querySelector('.done') ? document.querySelector('.done').innerText : ''`,
		&done, func() bool { return done == paused.Host()+": 3 queued webhooks purged." })
	if n := hostQueued(t, hp, paused.Host()); n != 0 {
		t.Fatalf("%d queued after the purge", n)
	}
}

// kill -9 right after the 202s: every webhook has its history after the
// restart (an accepted record the crash lost is written again from the
// queue when the spool opens), and goes on to be delivered.
func TestJournalAfterKill(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, `egress: {allow: ["127.0.0.0/8"]}`)
	if out, err := hp.CLI("pause", rc.Host()); err != nil {
		t.Fatalf("pause: %v\n%s", err, out)
	}
	c := hp.Client()
	var ids []string
	for i := range 20 {
		_, id := hp.Post(c, rc.URL+"/k", WebhookBody(i), nil)
		ids = append(ids, id)
	}
	hp.Kill()
	hp.Restart()
	for i, id := range ids {
		if m := lookup(t, hp, id); m.State != "held" || m.Position != i+1 {
			t.Fatalf("after kill -9, %s: %+v; want held at %d", id, m, i+1)
		}
	}
	if out, err := hp.CLI("resume", rc.Host()); err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	rc.WaitFor(t, 20*time.Second, "20 deliveries", func(as []Arrival) bool { return Delivered2xx(as) >= 20 })
	// Their answers are taken in parallel: the first may be recorded last.
	Poll(t, 10*time.Second, "all 20 delivered", func() bool {
		for _, id := range ids {
			if lookup(t, hp, id).State != "delivered" {
				return false
			}
		}
		return true
	})
	if m := lookup(t, hp, ids[0]); m.State != "delivered" || len(m.Attempts) != 1 || m.Attempts[0].Status != 200 {
		t.Fatalf("%+v", m)
	}
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
