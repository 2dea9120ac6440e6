package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pageRow is a host row of the status page as Chromium renders it.
type pageRow struct {
	Host, Queued, Paused, Dead, Breaker string
	Cells                               map[string]string
}

const rowsJS = `[...document.querySelectorAll('#hosts tr[data-host]')].map(tr => ({
	host: tr.dataset.host, queued: tr.dataset.queued, paused: tr.dataset.paused, dead: tr.dataset.dead, breaker: tr.dataset.breaker,
	cells: Object.fromEntries([...tr.querySelectorAll('[data-col]')].map(td => [td.dataset.col, td.innerText.trim()]))}))`

func pageRows(b *Browser) map[string]pageRow {
	var rows []pageRow
	b.Eval(rowsJS, &rows)
	out := map[string]pageRow{}
	for _, r := range rows {
		out[r.Host] = r
	}
	return out
}

// TestStatusPageInBrowser opens the status page of the real binary in
// headless Chromium while one host is paused with 7 queued, one has
// delivered and one has a dead letter; pauses a host through the page's
// form; watches the page update itself; and checks that a form posted from
// another origin is refused.
func TestStatusPageInBrowser(t *testing.T) {
	t.Parallel()
	hp, ok, paused, gone, busy := startFourHosts(t)
	b := StartBrowser(t)
	admin := "http://" + hp.Admin + "/"
	b.Navigate(admin)
	rows := pageRows(b)
	p, o, g := rows[paused.Host()], rows[ok.Host()], rows[gone.Host()]
	if p.Queued != "7" || p.Paused != "true" || p.Cells["queued"] != "7" || p.Cells["hold"] != "paused" {
		t.Errorf("paused host's row: %+v; want 7 queued, paused", p)
	}
	if o.Host == "" || o.Queued != "0" || o.Paused != "false" || o.Cells["last-status"] != "–" || o.Breaker != "closed" {
		t.Errorf("delivering host's row: %+v; want 0 queued, no failure, breaker closed", o)
	}
	if g.Dead != "1" || g.Cells["last-status"] != "410" {
		t.Errorf("gone host's row: %+v; want 1 dead letter, last status 410", g)
	}
	if h := rows[busy.Host()]; h.Queued != "2" || !strings.HasPrefix(h.Cells["hold"], "429 Retry-After for ") || !strings.Contains(h.Cells["hold"], "until ") {
		t.Errorf("held host's row: %+v; want 2 queued, held by the 429", h)
	}
	var spool map[string]string
	b.Eval(`({messages: document.getElementById('spool-messages').innerText, dead: document.getElementById('spool-dead').innerText,
		state: document.getElementById('spool').dataset.state, oldest: document.getElementById('spool-oldest').innerText,
		meter: document.getElementById('g-messages').dataset.value})`, &spool)
	if spool["messages"] != "9" || spool["dead"] != "1" || spool["state"] != "accepting" ||
		!strings.Contains(spool["oldest"], paused.Host()) || spool["meter"] == "0" {
		t.Errorf("spool section: %v; want 9 messages, 1 dead letter, accepting, the oldest at %s", spool, paused.Host())
	}
	shot := filepath.Join(artifactDir(t), "status-page.png")
	b.Screenshot(shot, false)

	// Pause the delivering host with its button.
	var token string
	b.Eval(`document.querySelector('input[name=csrf_token]').value`, &token)
	// The click posts a form: the page navigates, maybe before the
	// evaluation answers.
	if err := b.TryEval(fmt.Sprintf(`document.querySelector('tr[data-host=%q] form[action="/ui/pause"] button').click(), true`, ok.Host()), nil); err != nil && !errors.Is(err, errNavigated) {
		t.Fatal(err)
	}
	var done string
	b.Until("the page back after the pause", `document.readyState === 'complete' && document.querySelector('.done') ? document.querySelector('.done').innerText : ''`,
		&done, func() bool { return done == ok.Host()+": paused." })
	var st struct{ Paused bool }
	hp.AdminJSON("/v1/hosts/"+ok.Host(), &st)
	if !st.Paused || pageRows(b)[ok.Host()].Paused != "true" {
		t.Fatalf("after the pause button: API says paused=%v, page row %+v", st.Paused, pageRows(b)[ok.Host()])
	}

	// The page follows a change made elsewhere without being reloaded.
	b.Eval(`window.notReloaded = true`, nil)
	if out, err := hp.CLI("resume", ok.Host()); err != nil {
		t.Fatalf("hookpace resume: %v\n%s", err, out)
	}
	var live []pageRow
	b.Until("the live update showing the resume", rowsJS, &live, func() bool {
		for _, r := range live {
			if r.Host == ok.Host() {
				return r.Paused == "false"
			}
		}
		return false
	})
	var same bool
	b.Eval(`window.notReloaded === true`, &same)
	if !same {
		t.Error("the page was reloaded instead of updated in place")
	}

	checkCharts(t, b, ok.Host(), paused.Host())
	b.Screenshot(filepath.Join(artifactDir(t), "status-page-charts.png"), false)

	// A page on another origin posts the pause form, even with the token
	// (as if it had leaked): refused, and the host keeps sending.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><form id=f method=post action="%s"><input name=host value="%s"><input name=csrf_token value="%s"></form><script>document.getElementById('f').submit()</script>`,
			html.EscapeString(admin+"ui/pause"), html.EscapeString(ok.Host()), html.EscapeString(token))
	}))
	defer evil.Close()
	b.Go(evil.URL + "/") // it posts its form at once: wait for where that leads
	b.WaitLoaded(func(href string) bool { return href == admin+"ui/pause" })
	var text string
	b.Eval(`document.body.innerText`, &text)
	hp.AdminJSON("/v1/hosts/"+ok.Host(), &st)
	if st.Paused || !strings.Contains(text, "refused") {
		t.Errorf("cross-origin form: host paused=%v, the answer %q; want it refused", st.Paused, text)
	}
}

// chartsJS reads the spool's charts and the sparklines of two hosts (%q,
// %q) as drawn.
const chartsJS = `(() => {
	const rate = document.getElementById('chart-rate'), queued = document.getElementById('chart-queued');
	const spark = h => { const s = document.querySelector('tr[data-host="' + h + '"] svg.spark');
		return s ? {delivered: s.dataset.delivered, queued: s.dataset.queued, width: s.querySelector('path.q').getBBox().width} : null; };
	return rate && queued ? {accepted: rate.dataset.accepted, delivered: rate.dataset.delivered, queued: queued.dataset.now,
		width: rate.querySelector('path.acc').getBBox().width, height: rate.querySelector('svg').getBoundingClientRect().height,
		ok: spark(%[1]q), paused: spark(%[2]q)} : null;
})()`

// checkCharts waits for the charts to show the webhooks of
// startFourHosts: 13 accepted, 3 delivered, 9 queued, and in the
// sparklines the delivering host's 3 deliveries and the paused host's 7
// queued (hosts are sampled every 10 s, and the page updates itself every
// 5 s: each read is of one whole update).
func checkCharts(t *testing.T, b *Browser, ok, paused string) {
	t.Helper()
	type spark struct {
		Delivered, Queued string
		Width             float64
	}
	var c struct {
		Accepted, Delivered, Queued string
		Width, Height               float64
		OK, Paused                  *spark
	}
	b.Until("the charts with the webhooks that went through", fmt.Sprintf(chartsJS, ok, paused), &c, func() bool {
		return c.Accepted == "13" && c.Delivered == "3" && c.OK != nil && c.OK.Delivered == "3" && c.Paused != nil
	})
	t.Logf("charts: %s accepted, %s delivered, %s queued; sparklines: ok %+v, paused %+v", c.Accepted, c.Delivered, c.Queued, *c.OK, *c.Paused)
	if c.Queued != "9" || c.Width <= 0 || c.Height <= 0 || c.OK.Width <= 0 || c.Paused.Queued != "7" || c.Paused.Delivered != "0" {
		t.Errorf("charts: %+v, ok %+v, paused %+v; want 9 queued, drawn, the paused host's 7 queued", c, c.OK, c.Paused)
	}
}

// startFourHosts starts hookpace with four partners and leaves them so:
// paused (7 queued), ok (3 delivered), gone (its one webhook answered
// 410: a dead letter) and busy (2 queued, held by a 429; concurrency 1, so
// the second is never sent alongside the first before the hold).
func startFourHosts(t *testing.T) (hp *Hookpace, ok, paused, gone, busy *Receiver) {
	ok, paused, gone, busy = NewReceiver(t), NewReceiver(t), NewReceiver(t), NewReceiver(t)
	gone.Handle = func(w http.ResponseWriter, r *http.Request, n int) { w.WriteHeader(http.StatusGone) }
	busy.Handle = func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Retry-After", "600")
		w.WriteHeader(http.StatusTooManyRequests)
	}
	hp = Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 50/s}
  "%s": {rate: 20/s, burst: 5}
  "%s": {rate: 5/s}
  "%s": {rate: 10/s, concurrency: 1}
`, ok.Host(), paused.Host(), gone.Host(), busy.Host()))
	if out, err := hp.CLI("pause", paused.Host()); err != nil {
		t.Fatalf("hookpace pause: %v\n%s", err, out)
	}
	PostAll(t, hp, 7, 4, func(i int) string { return fmt.Sprintf("%s/hook/%d", paused.URL, i) })
	PostAll(t, hp, 3, 3, func(i int) string { return fmt.Sprintf("%s/hook/%d", ok.URL, i) })
	PostAll(t, hp, 1, 1, func(i int) string { return gone.URL + "/hook" })
	PostAll(t, hp, 2, 1, func(i int) string { return busy.URL + "/hook" })
	ok.WaitFor(t, 10*time.Second, "3 deliveries", func(as []Arrival) bool { return len(as) == 3 })
	Poll(t, 10*time.Second, "the 410 dead-lettered", func() bool {
		var sp struct{ Messages, Dead int64 }
		var raw map[string]any
		hp.AdminJSON("/v1/spool", &raw)
		b, _ := json.Marshal(raw)
		json.Unmarshal(b, &struct {
			Messages *int64 `json:"messages"`
			Dead     *int64 `json:"dead_letters"`
		}{&sp.Messages, &sp.Dead})
		// The dead letter's attempt is counted after its burial is
		// handed to the spool's writer, which may make it first.
		return sp.Dead == 1 && sp.Messages == 9 && strings.Contains(hp.Metrics(), `outcome="dead"`)
	})
	busy.WaitFor(t, 10*time.Second, "the 429", func(as []Arrival) bool { return len(as) == 1 })
	// The receiver has answered; hookpace takes the answer a moment later.
	Poll(t, 10*time.Second, "the 429 taken: the host held, the attempt counted", func() bool {
		var st struct {
			HeldUntil  *time.Time `json:"held_until"`
			HoldReason string     `json:"hold_reason"`
		}
		hp.AdminJSON("/v1/hosts/"+busy.Host(), &st)
		return st.HeldUntil != nil && st.HoldReason != "" && strings.Contains(hp.Metrics(), `outcome="held"`)
	})
	if n := len(paused.Arrivals()); n != 0 {
		t.Fatalf("the paused host got %d webhooks", n)
	}

	return hp, ok, paused, gone, busy
}

// TestHelpAndVersion runs the binary as a user would.
func TestHelpAndVersion(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"--help", "-h"} {
		out, err := exec.Command(binary, arg).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Usage:") || !strings.Contains(string(out), "hookpace status") {
			t.Errorf("hookpace %s: %v\n%s", arg, err, out)
		}
	}
	out, err := exec.Command(binary, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "hookpace ") || !strings.Contains(string(out), "\ncommit ") ||
		!strings.Contains(string(out), "\ngo1.") {
		t.Errorf("hookpace version: %v\n%s", err, out)
	}
}
