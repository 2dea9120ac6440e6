package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

type queueHost struct {
	Queued int64 `json:"queued"`
	Paused bool  `json:"paused"`
}

func hostQueued(t *testing.T, hp *Hookpace, host string) int64 {
	t.Helper()
	var st queueHost
	hp.AdminJSON("/v1/hosts/"+url.PathEscape(host), &st)
	return st.Queued
}

// hookpace queue purge --host
// 127.0.0.1:P on a paused host with 100 queued leaves none queued for it,
// leaves another host on the same IP untouched, and nothing purged arrives
// once the host is resumed.
func TestQueuePurgePausedHost(t *testing.T) {
	t.Parallel()
	purged, kept := NewReceiver(t), NewReceiver(t)
	hp := Start(t, `egress: {allow: ["127.0.0.0/8"]}`)
	for _, rc := range []*Receiver{purged, kept} {
		if out, err := hp.CLI("pause", rc.Host()); err != nil {
			t.Fatalf("pause: %v\n%s", err, out)
		}
	}
	c := hp.Client()
	var ids []string
	for i := range 100 {
		status, id := hp.Post(c, fmt.Sprintf("%s/old/%d", purged.URL, i), WebhookBody(i), nil)
		if status != http.StatusAccepted {
			t.Fatalf("POST %d: %d", i, status)
		}
		ids = append(ids, id)
		if i%10 == 0 {
			hp.Post(c, fmt.Sprintf("%s/kept/%d", kept.URL, i), WebhookBody(i), nil)
		}
	}
	if n := hostQueued(t, hp, purged.Host()); n != 100 {
		t.Fatalf("%d queued before the purge", n)
	}
	out, err := hp.CLI("queue", "list", "--host", purged.Host(), "--limit", "5")
	if err != nil || !strings.Contains(out, ids[0]) || !strings.Contains(out, "100 queued for "+purged.Host()) {
		t.Fatalf("queue list: %v\n%s", err, out)
	}
	out, err = hp.CLI("queue", "purge", "--host", purged.Host())
	if err != nil || !strings.Contains(out, "purged 100 queued webhooks of "+purged.Host()) {
		t.Fatalf("queue purge: %v\n%s", err, out)
	}
	if n := hostQueued(t, hp, purged.Host()); n != 0 {
		t.Fatalf("%d queued after the purge", n)
	}
	if n := hostQueued(t, hp, kept.Host()); n != 10 {
		t.Fatalf("the other host on 127.0.0.1 has %d queued, want 10", n)
	}
	if m := lookup(t, hp, ids[42]); m.State != "purged" || !strings.Contains(m.Reason, "purged by ") {
		t.Fatalf("purged webhook: %+v", m)
	}
	// The harness reads hookpace's log as it comes.
	Poll(t, 10*time.Second, "the purge's log line", func() bool {
		l := hp.Log()
		return strings.Contains(l, `msg="queue purged"`) && strings.Contains(l, "count=100") && strings.Contains(l, "by=")
	})
	if out, err := hp.CLI("resume", purged.Host()); err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	// FIFO: anything purged that were still to go would arrive before this.
	hp.Post(c, purged.URL+"/fence", WebhookBody(0), nil)
	purged.WaitFor(t, 20*time.Second, "the webhook after the purge", func(as []Arrival) bool { return len(as) > 0 })
	if as := purged.Arrivals(); len(as) != 1 || as[0].Path != "/fence" {
		t.Fatalf("arrived after the purge: %d, first %s", len(as), as[0].Path)
	}
	if n := kept.Count(nil); n != 0 {
		t.Fatalf("the paused other host got %d", n)
	}
}

// With max_age 2s, webhooks held behind
// a pause are dead letters with the reason max_age, not deliveries.
func TestMaxAgeBehindPause(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, "egress: {allow: [\"127.0.0.0/8\"]}\ndefaults:\n  max_age: 2s\n")
	if out, err := hp.CLI("pause", rc.Host()); err != nil {
		t.Fatalf("pause: %v\n%s", err, out)
	}
	c := hp.Client()
	var ids []string
	for i := range 5 {
		_, id := hp.Post(c, fmt.Sprintf("%s/held/%d", rc.URL, i), WebhookBody(i), nil)
		ids = append(ids, id)
	}
	type deadList struct {
		Total int `json:"total"`
		Dead  []struct {
			ID     string `json:"id"`
			Reason string `json:"reason"`
		} `json:"dead"`
	}
	var dl deadList
	Poll(t, 20*time.Second, "5 dead letters", func() bool {
		hp.AdminJSON("/v1/dead?host="+url.QueryEscape(rc.Host()), &dl)
		return dl.Total == 5
	})
	for _, d := range dl.Dead {
		if !strings.HasPrefix(d.Reason, "max_age") {
			t.Fatalf("reason %q", d.Reason)
		}
	}
	if out, err := hp.CLI("resume", rc.Host()); err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	hp.Post(c, rc.URL+"/fence", WebhookBody(9), nil)
	rc.WaitFor(t, 20*time.Second, "the fresh webhook", func(as []Arrival) bool { return len(as) > 0 })
	if as := rc.Arrivals(); len(as) != 1 || as[0].Path != "/fence" {
		t.Fatalf("%d arrived, first %s: held webhooks were delivered past max_age", len(as), as[0].Path)
	}
	if m := lookup(t, hp, ids[0]); m.State != "dead" || !strings.HasPrefix(m.Reason, "max_age") {
		t.Fatalf("journal: %+v", m)
	}
	// Dead letters by when they died: none before an hour ago, all five since.
	if out, err := hp.CLI("dead", "purge", "--until", "1h"); err != nil || !strings.Contains(out, "purged 0 dead letters") {
		t.Fatalf("dead purge --until 1h: %v\n%s", err, out)
	}
	if out, err := hp.CLI("dead", "purge", "--since", "1h", "--host", rc.Host()); err != nil || !strings.Contains(out, "purged 5 dead letters") {
		t.Fatalf("dead purge --since 1h: %v\n%s", err, out)
	}
}
