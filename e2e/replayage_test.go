package e2e

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"
)

// Webhooks that died of max_age at the head of a paused host, replayed
// while it is still paused and resumed a second later, are delivered:
// a replay's max_age counts from the replay. The replay says what the
// paused host will do with them, `msg show` keeps the first acceptance
// and says when the webhook was queued again, `msg list` prints a cursor
// only while webhooks are left, and a resend to a paused host says the
// same as a replay.
func TestReplayAfterMaxAgeIsDelivered(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, "egress: {allow: [\"127.0.0.0/8\"]}\njournal: {bodies: true}\ndefaults:\n  max_age: 3s\n")
	if out, err := hp.CLI("pause", rc.Host()); err != nil {
		t.Fatalf("pause: %v\n%s", err, out)
	}
	c := hp.Client()
	var ids []string
	for i := range 6 {
		_, id := hp.Post(c, fmt.Sprintf("%s/held/%d", rc.URL, i), WebhookBody(i), nil)
		ids = append(ids, id)
	}
	var dl struct {
		Total int `json:"total"`
		Dead  []struct {
			Reason string `json:"reason"`
		} `json:"dead"`
	}
	dead := func() int {
		hp.AdminJSON("/v1/dead?host="+url.QueryEscape(rc.Host()), &dl)
		return dl.Total
	}
	Poll(t, 30*time.Second, "6 dead letters", func() bool { return dead() == 6 })
	for _, d := range dl.Dead {
		if !strings.HasPrefix(d.Reason, "max_age 3s exceeded at the head") {
			t.Fatalf("dead of %q, want max_age at the head", d.Reason)
		}
	}

	out, err := hp.CLI("dead", "replay", "--host", rc.Host())
	if err != nil || !strings.Contains(out, "replayed 6 dead letters") ||
		!strings.Contains(out, rc.Host()+": paused: they wait until it is resumed (hookpace resume "+rc.Host()+")") ||
		!strings.Contains(out, "max_age 3s counts from this replay: those still queued at") {
		t.Fatalf("dead replay: %v\n%s", err, out)
	}
	// The scenario: the operator resumes a second after the replay.
	time.Sleep(time.Second)
	if n := dead(); n != 0 {
		t.Fatalf("%d dead letters a second after the replay, still paused: the replay died again at once", n)
	}
	if out, err := hp.CLI("resume", rc.Host()); err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	rc.WaitFor(t, 30*time.Second, "the 6 replayed webhooks", func(as []Arrival) bool { return Delivered2xx(as) == 6 })
	if n := dead(); n != 0 {
		t.Fatalf("%d dead letters after the delivery", n)
	}
	// The receiver counts each before hookpace has read its answer.
	Poll(t, 30*time.Second, "msg show to read all 6 delivered", func() bool {
		for _, id := range ids {
			if lookup(t, hp, id).State != "delivered" {
				return false
			}
		}
		return true
	})
	var m struct {
		AcceptedAt time.Time  `json:"accepted_at"`
		RequeuedAt *time.Time `json:"requeued_at"`
	}
	hp.AdminJSON("/v1/messages/"+ids[0], &m)
	if m.RequeuedAt == nil || !m.AcceptedAt.Before(*m.RequeuedAt) || m.RequeuedAt.Sub(m.AcceptedAt) < 3*time.Second {
		t.Fatalf("GET /v1/messages/%s: accepted %v, requeued %v; want the first acceptance, then the replay 3s or more later",
			ids[0], m.AcceptedAt, m.RequeuedAt)
	}
	if out, err := hp.CLI("msg", "show", ids[0]); err != nil || !strings.Contains(out, "requeued  ") {
		t.Fatalf("msg show: %v\n%s", err, out)
	}

	// Twelve journal entries, two lives of each webhook, list as six: a
	// page of six is all of them, without a cursor; a page of five has one.
	if out, err := hp.CLI("msg", "list", "--limit", "6"); err != nil || strings.Contains(out, "more:") || strings.Count(out, "delivered") != 6 {
		t.Fatalf("msg list --limit 6 of 6 webhooks: %v\n%s", err, out)
	}
	if out, err := hp.CLI("msg", "list", "--limit", "5"); err != nil || !strings.Contains(out, "more: --cursor ") {
		t.Fatalf("msg list --limit 5 of 6 webhooks: %v\n%s", err, out)
	}

	if out, err := hp.CLI("pause", rc.Host()); err != nil {
		t.Fatalf("pause: %v\n%s", err, out)
	}
	out, err = hp.CLI("msg", "resend", ids[1])
	if err != nil || !strings.Contains(out, "queued again for "+rc.Host()) ||
		!strings.Contains(out, "paused: they wait until it is resumed") || !strings.Contains(out, "max_age 3s counts from this resend") {
		t.Fatalf("msg resend to a paused host: %v\n%s", err, out)
	}
}
