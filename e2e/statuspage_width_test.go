package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// widthJS measures the status page as drawn: the document's width, and
// every host column's header and every button whose box ends right of
// the viewport (or has no box).
const widthJS = `(() => {
	const w = document.documentElement.clientWidth;
	const out = [];
	const check = (el, what) => {
		const r = el.getBoundingClientRect();
		if (r.width === 0 || r.left < 0 || r.right > w) out.push(what + ' [' + Math.round(r.left) + ', ' + Math.round(r.right) + ']');
	};
	document.querySelectorAll('#hosts th').forEach(th => check(th, 'column ' + th.innerText.trim()));
	document.querySelectorAll('button, input[type=submit]').forEach(b => {
		if (b.closest('[hidden]') || getComputedStyle(b).display === 'none') return;
		const row = b.closest('tr[data-host]');
		check(b, 'button ' + b.innerText.trim() + (row ? ' of ' + row.dataset.host : ''));
	});
	return {viewport: w, scroll: document.documentElement.scrollWidth, buttons: document.querySelectorAll('#hosts tr[data-host] button').length, outside: out};
})()`

// The status page at 1280 × 900, a laptop's browser: every column and
// every action lies within the window, with no horizontal scrolling
// (the screenshot is left in artifactDir).
func TestStatusPageFits1280(t *testing.T) {
	t.Parallel()
	hp, _, _, gone, _ := startFourHosts(t)
	b := StartBrowser(t)
	b.call("Emulation.setDeviceMetricsOverride", map[string]any{"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": false}, nil)
	b.Navigate("http://" + hp.Admin + "/")
	var got struct {
		Viewport, Scroll, Buttons int
		Outside                   []string
	}
	b.Eval(widthJS, &got)
	b.Screenshot(filepath.Join(artifactDir(t), "status-page-1280.png"), false)
	if got.Viewport != 1280 || got.Buttons == 0 {
		t.Fatalf("viewport %d px with %d row buttons: the page is not what this test measures", got.Viewport, got.Buttons)
	}
	if got.Scroll > got.Viewport || len(got.Outside) > 0 {
		t.Errorf("at 1280 px the page is %d px wide; outside the window:\n%s", got.Scroll, strings.Join(got.Outside, "\n"))
	}
	var replay int
	b.Eval(fmt.Sprintf(`document.querySelectorAll('tr[data-host=%q] form[action="/ui/replay"] button').length`, gone.Host()), &replay)
	if replay != 1 {
		t.Errorf("%d replay buttons on the row of the host with a dead letter, want 1", replay)
	}
}
