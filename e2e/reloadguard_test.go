package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// A config truncated while hookpace runs (`: > config.yaml`,
// or an editor caught half-way) is refused on reload, and the running
// config stays: proxy auth and the egress allow-list hold, and what was
// queued is delivered under them. A file cut short that still parses is
// refused too when it would turn off auth or egress rules without naming
// them; one that names them (`auth: {users: []}`) is taken.
func TestReloadRefusesTruncatedConfig(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hosts := fmt.Sprintf("hosts:\n  %q: {rate: 2/s, burst: 1}\n", rc.Host())
	hp := Start(t, "egress: {allow: [\"127.0.0.0/8\"]}\nauth: {users: [{username: app, password: s3cret}]}\n"+hosts)
	as := func(u *url.Userinfo) *http.Client {
		p, _ := url.Parse("http://" + hp.Proxy)
		p.User = u
		return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(p)}}
	}
	app, anon := as(url.UserPassword("app", "s3cret")), as(nil)
	const n = 8
	for i := range n {
		if status, _ := hp.Post(app, fmt.Sprintf("%s/h/%d", rc.URL, i), WebhookBody(i), nil); status != http.StatusAccepted {
			t.Fatalf("webhook %d: %d", i, status)
		}
	}
	refusals := func() int { return strings.Count(hp.Log(), "config reload rejected") }

	// Emptied, as `: > config.yaml` does.
	if err := os.WriteFile(hp.Config, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	Poll(t, 10*time.Second, "the empty file refused", func() bool { return refusals() == 1 })
	if !strings.Contains(hp.Log(), "the file is empty") {
		t.Errorf("the refusal does not say why:\n%s", grepLines(hp.Log(), "reload"))
	}
	if status, _ := hp.Post(anon, rc.URL+"/anon", []byte("{}"), nil); status != http.StatusProxyAuthRequired {
		t.Errorf("after the empty file, a POST without credentials got %d, want 407: proxy auth was turned off", status)
	}

	// Cut short after the hosts: it parses, but has no auth or egress.
	rewrite(t, hp, hosts)
	Poll(t, 10*time.Second, "the short file refused", func() bool { return refusals() == 2 })
	for _, field := range []string{"auth.users", "egress.allow"} {
		if !strings.Contains(hp.Log(), field+": the running config has") {
			t.Errorf("the refusal does not name %s:\n%s", field, grepLines(hp.Log(), "reload"))
		}
	}
	if status, _ := hp.Post(anon, rc.URL+"/anon", []byte("{}"), nil); status != http.StatusProxyAuthRequired {
		t.Errorf("after the short file, a POST without credentials got %d, want 407", status)
	}

	// Everything queued is delivered under the old rules, none buried.
	rc.WaitFor(t, 30*time.Second, "the queued webhooks", func(as []Arrival) bool { return Delivered2xx(as) >= n })
	var sp struct{ Messages, Dead int }
	hp.AdminJSON("/v1/spool", &sp)
	if sp.Dead != 0 {
		t.Errorf("%d dead letters: the queued webhooks lost their egress rules", sp.Dead)
	}

	// Saying so turns auth off.
	rewrite(t, hp, "egress: {allow: [\"127.0.0.0/8\"]}\nauth: {users: []}\n"+hosts)
	Poll(t, 10*time.Second, "the explicit file taken", func() bool { return strings.Contains(hp.Log(), "config reloaded") })
	if status, _ := hp.Post(anon, rc.URL+"/anon", []byte("{}"), nil); status != http.StatusAccepted {
		t.Errorf("with auth: {users: []}, a POST without credentials got %d, want 202", status)
	}
}
