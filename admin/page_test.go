package admin

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/spool"
)

// hostsTable stands in for the dispatcher (admin's layer above it is what
// is tested here; e2e runs the page against the real one).
type hostsTable struct {
	mu     sync.Mutex
	hosts  []deliver.HostStatus
	queued func(host string) int64
}

func (h *hostsTable) Hosts() []deliver.HostStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := slices.Clone(h.hosts)
	for i := range out {
		out[i].Queued = h.queued(out[i].Host)
	}
	return out
}

func (h *hostsTable) HostNames() []string {
	var out []string
	for _, s := range h.Hosts() {
		out = append(out, s.Host)
	}
	return out
}

func (h *hostsTable) HostsNamed(names []string) []deliver.HostStatus {
	var out []deliver.HostStatus
	for _, n := range names {
		if s, ok := h.Host(n); ok {
			out = append(out, s)
		}
	}
	return out
}

func (h *hostsTable) Host(name string) (deliver.HostStatus, bool) {
	for _, s := range h.Hosts() {
		if s.Host == name {
			return s, true
		}
	}
	return deliver.HostStatus{}, false
}

func (h *hostsTable) set(name string, f func(*deliver.HostStatus)) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range h.hosts {
		if h.hosts[i].Host == name {
			f(&h.hosts[i])
			return true
		}
	}
	return false
}

func (h *hostsTable) Pause(name string) error {
	h.set(name, func(s *deliver.HostStatus) { s.Paused = true })
	return nil
}
func (h *hostsTable) Resume(name string) (bool, error) {
	return h.set(name, func(s *deliver.HostStatus) { s.Paused = false }), nil
}
func (h *hostsTable) Fleet() *deliver.FleetStatus { return nil }

// Purge and BuryQueue take all that is queued for host (what sel picks
// is the dispatcher's business, tested in deliver).
func (h *hostsTable) Purge(host string, _ deliver.Selection) (deliver.BacklogResult, error) {
	return deliver.BacklogResult{Host: host, Done: int(h.queued(host))}, nil
}
func (h *hostsTable) BuryQueue(host string, sel deliver.Selection) (deliver.BacklogResult, error) {
	return h.Purge(host, sel)
}

// fixture: a real spool holding 7 messages for paused.example (enqueued
// 90 s before now) and one dead letter for gone.example, and the page
// showing it at now.
type fixture struct {
	sp    *spool.Spool
	hosts *hostsTable
	srv   *httptest.Server
	page  *page
	now   time.Time
}

func newFixture(t testing.TB, extra ...deliver.HostStatus) *fixture {
	sp, err := openJournaled(spool.Options{Dir: t.TempDir(), MaxMessages: 10000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for i := range 7 {
		m := &spool.Message{Host: "paused.example", Method: "POST", URL: "http://paused.example/hook",
			Body: []byte(fmt.Sprint(i)), Enqueued: now.Add(-90*time.Second + time.Duration(i)*time.Second)}
		if err := sp.Append(context.Background(), m, 0); err != nil {
			t.Fatal(err)
		}
	}
	dead := &spool.Message{Host: "gone.example", Method: "POST", URL: "http://gone.example/", Enqueued: now}
	if err := sp.Append(context.Background(), dead, 0); err != nil {
		t.Fatal(err)
	}
	sp.Bury(dead, "permanent status 410", now)
	// Bury returns before its commit; an Append waits for its own, which
	// the one writer makes after (or with) the Bury's.
	again := &spool.Message{Host: "gone.example", Method: "POST", URL: "http://gone.example/", Enqueued: now}
	if err := sp.Append(context.Background(), again, 0); err != nil || sp.Usage().Dead != 1 {
		t.Fatalf("append: %v; %d dead letters, want 1", err, sp.Usage().Dead)
	}
	hosts := &hostsTable{queued: func(h string) int64 { return sp.HostUsage(h).Messages }, hosts: append([]deliver.HostStatus{
		{Host: "paused.example", Paused: true, Rate: 5, ConfiguredRate: 5, Breaker: "closed", HoldReason: "paused"},
		{Host: "gone.example", Rate: 2, ConfiguredRate: 10, Breaker: "open", LastStatus: 410, LastError: "410 Gone"},
	}, extra...)}
	f := &fixture{sp: sp, hosts: hosts, now: now}
	mux := http.NewServeMux()
	a := &api{Options{Hosts: hosts, Spool: sp, Journal: journalOf(sp), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	f.page = a.routePage(mux)
	f.page.now = func() time.Time { return now }
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// row is one host row of the page as a browser would read it.
type row struct {
	attrs map[string]string // data-* of the <tr>
	cells map[string]string // text of each data-col cell
}

// render fetches the page at query and reads its rows (in order) and the
// text of the elements with an id.
func (f *fixture) render(t testing.TB, query string) (rows []row, hosts []string, ids map[string]string, body string) {
	t.Helper()
	resp, err := http.Get(f.srv.URL + "/" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /%s: %s %s", query, resp.Status, resp.Header.Get("Content-Type"))
	}
	doc, err := html.Parse(strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	ids = map[string]string{}
	for n := range doc.Descendants() {
		if n.Type != html.ElementNode {
			continue
		}
		if id := attr(n, "id"); id != "" {
			ids[id] = strings.Join(strings.Fields(text(n)), " ")
		}
		if n.Data == "tr" && attr(n, "data-host") != "" {
			r := row{attrs: map[string]string{}, cells: map[string]string{}}
			for _, a := range n.Attr {
				r.attrs[a.Key] = a.Val
			}
			for c := range n.Descendants() {
				if col := attr(c, "data-col"); col != "" {
					r.cells[col] = strings.TrimSpace(text(c))
				}
			}
			rows = append(rows, r)
			hosts = append(hosts, r.attrs["data-host"])
		}
	}
	return rows, hosts, ids, string(b)
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func text(n *html.Node) string {
	var b strings.Builder
	for c := range n.Descendants() {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	}
	return b.String()
}

func TestPageShowsSpoolAndHosts(t *testing.T) {
	f := newFixture(t)
	rows, hosts, ids, body := f.render(t, "")
	if !slices.Equal(hosts, []string{"paused.example", "gone.example"}) {
		t.Fatalf("rows %v, want paused.example (7 queued) then gone.example (1)", hosts)
	}
	p, g := rows[0], rows[1]
	for k, want := range map[string]string{"data-queued": "7", "data-paused": "true", "data-dead": "0"} {
		if p.attrs[k] != want {
			t.Errorf("paused.example %s = %q, want %q", k, p.attrs[k], want)
		}
	}
	for k, want := range map[string]string{"queued": "7", "oldest": "1m30s", "hold": "paused", "rate": "5/s", "dead": "0"} {
		if p.cells[k] != want {
			t.Errorf("paused.example cell %s = %q, want %q", k, p.cells[k], want)
		}
	}
	for k, want := range map[string]string{"queued": "1", "breaker": "open", "last-status": "410",
		"last-error": "410 Gone", "dead": "1", "rate": "2/sof 10/s configured"} {
		if g.cells[k] != want {
			t.Errorf("gone.example cell %s = %q, want %q", k, g.cells[k], want)
		}
	}
	for id, want := range map[string]string{"spool-messages": "8", "spool-dead": "1", "spool-hosts": "2",
		"spool-oldest": "1m30s (paused.example)"} {
		if ids[id] != want {
			t.Errorf("#%s = %q, want %q", id, ids[id], want)
		}
	}
	for _, want := range []string{"Accepting", `aria-label="Resume paused.example"`, `aria-label="Pause gone.example"`,
		`aria-label="Replay the 1 dead letters of gone.example"`, fmt.Sprintf(`<line class="mark high" x1="%.2f%%"`, 100*f.sp.Usage().HighWater), fmt.Sprintf(`<line class="mark" x1="%.2f%%"`, 100*f.sp.Usage().LowWater), `data-value="0.0008"`} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// Nothing is loaded from elsewhere: the page must work offline.
	if m := regexp.MustCompile(`(?i)(src|href)="(https?:)?//`).FindString(body); m != "" {
		t.Errorf("page refers to an external resource: %s", m)
	}
}

func TestPageSortsFiltersAndPages(t *testing.T) {
	f := newFixture(t,
		deliver.HostStatus{Host: "a-idle.example", Breaker: "closed"},
		deliver.HostStatus{Host: "b-idle.example", Breaker: "closed"})
	cases := []struct {
		query string
		want  []string
	}{
		{"", []string{"paused.example", "gone.example", "a-idle.example", "b-idle.example"}},
		// gone.example's message is newer than paused.example's oldest.
		{"?sort=oldest", []string{"paused.example", "gone.example", "a-idle.example", "b-idle.example"}},
		{"?sort=host", []string{"a-idle.example", "b-idle.example", "gone.example", "paused.example"}},
		{"?sort=host&per=2&page=2", []string{"gone.example", "paused.example"}},
		{"?sort=host&per=2&page=9", []string{"gone.example", "paused.example"}}, // past the end: the last page
		{"?q=IDLE", []string{"a-idle.example", "b-idle.example"}},
		{"?show=backlog", []string{"paused.example", "gone.example"}},
		{"?show=attention&sort=host", []string{"gone.example", "paused.example"}},
	}
	for _, c := range cases {
		if _, hosts, _, _ := f.render(t, c.query); !slices.Equal(hosts, c.want) {
			t.Errorf("/%s shows %v, want %v", c.query, hosts, c.want)
		}
	}
	_, _, _, body := f.render(t, "?sort=host&per=2")
	if !strings.Contains(body, `href="/?page=2&amp;per=2&amp;sort=host" rel="next"`) {
		t.Errorf("page 1 of 2 has no link to page 2")
	}
}

// post submits one of the page's forms as a browser would, with extra
// headers (Origin, Sec-Fetch-Site), without following the redirect.
func (f *fixture) post(t *testing.T, action string, form url.Values, header map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/ui/"+action, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func TestPageActionsNeedSameOriginAndToken(t *testing.T) {
	f := newFixture(t)
	token := f.page.token
	self := map[string]string{"Origin": f.srv.URL, "Sec-Fetch-Site": "same-origin"}
	refused := []struct {
		name   string
		form   url.Values
		header map[string]string
	}{
		{"no token", url.Values{"host": {"gone.example"}}, self},
		{"wrong token", url.Values{"host": {"gone.example"}, "csrf_token": {"x" + token[1:]}}, self},
		{"other origin", url.Values{"host": {"gone.example"}, "csrf_token": {token}},
			map[string]string{"Origin": "http://evil.example"}},
		{"cross-site fetch", url.Values{"host": {"gone.example"}, "csrf_token": {token}},
			map[string]string{"Sec-Fetch-Site": "cross-site"}},
	}
	for _, c := range refused {
		if resp := f.post(t, "pause", c.form, c.header); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %s, want 403", c.name, resp.Status)
		}
	}
	if st, _ := f.hosts.Host("gone.example"); st.Paused {
		t.Fatal("a refused form paused the host")
	}

	// The page's own form, as the browser sends it.
	resp := f.post(t, "pause", url.Values{"host": {"gone.example"}, "csrf_token": {token}, "back": {"sort=host&per=50"}}, self)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || loc != "/?done=paused&host=gone.example&per=50&sort=host" {
		t.Fatalf("pause: %s to %q, want 303 back to the page it came from", resp.Status, loc)
	}
	if st, _ := f.hosts.Host("gone.example"); !st.Paused {
		t.Fatal("pause through the form did not pause the host")
	}
	// Recording the pause in the spool is the dispatcher's part (deliver's
	// TestPauseIsRecordedAndRestored; e2e's TestStatusPauseResume).
	if _, _, ids, body := f.render(t, "?done=paused&host=gone.example"); !strings.Contains(body, "gone.example: paused.") {
		t.Errorf("the page after the redirect does not say what was done: %v", ids)
	}

	resp = f.post(t, "replay", url.Values{"host": {"gone.example"}, "csrf_token": {token}}, nil) // a client without Origin (curl)
	if resp.StatusCode != http.StatusSeeOther || f.sp.Usage().Dead != 0 || f.sp.HostUsage("gone.example").Messages != 2 {
		t.Errorf("replay: %s; %d dead, %d queued for gone.example; want 0 and 2", resp.Status,
			f.sp.Usage().Dead, f.sp.HostUsage("gone.example").Messages)
	}
	// The host is paused: the page says the replayed webhooks wait.
	if _, _, _, body := f.render(t, resp.Header.Get("Location")[1:]); !strings.Contains(body,
		"dead letters put back in the queue. The host is paused: they wait until it is resumed (hookpace resume gone.example)") {
		t.Errorf("the page after a replay to a paused host (%s) does not say they wait", resp.Header.Get("Location"))
	}
	if resp := f.post(t, "resume", url.Values{"host": {"gone.example"}, "csrf_token": {token}}, self); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("resume: %s", resp.Status)
	}
	if st, _ := f.hosts.Host("gone.example"); st.Paused {
		t.Error("resume through the form did not resume the host")
	}
	if resp := f.post(t, "purge", url.Values{"host": {"gone.example"}, "csrf_token": {token}}, self); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("an unknown action: %s, want 400", resp.Status)
	}
	if resp := f.post(t, "resume", url.Values{"host": {"nobody.example"}, "csrf_token": {token}}, self); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("resume of an unknown host: %s, want 400", resp.Status)
	}
	if resp := f.post(t, "pause", url.Values{"csrf_token": {token}}, self); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("no host: %s, want 400", resp.Status)
	}
}

func TestPageStaticAndHeaders(t *testing.T) {
	f := newFixture(t)
	for path, ctype := range map[string]string{"/static/page.css": "text/css", "/static/page.js": "text/javascript"} {
		resp, err := http.Get(f.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), ctype) {
			t.Errorf("GET %s: %s %q", path, resp.Status, resp.Header.Get("Content-Type"))
		}
	}
	resp, err := http.Get(f.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") ||
		!strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	if resp, _ := http.Get(f.srv.URL + "/nope"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nope: %s, want 404 (only / is the page)", resp.Status)
	}
}

func TestNum(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 1234567: "1,234,567", -12345: "-12,345"} {
		if got := num(n); got != want {
			t.Errorf("num(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestPageAccessible checks the markup a screen reader relies on: every
// visible form control has a label, every button a name, the tables a
// caption and scoped headers, the page a language.
func TestPageAccessible(t *testing.T) {
	f := newFixture(t)
	resp, err := http.Get(f.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	labelled := map[*html.Node]bool{}
	for n := range doc.Descendants() {
		if n.Type == html.ElementNode && n.Data == "label" {
			for c := range n.Descendants() {
				labelled[c] = true
			}
		}
	}
	var tables, buttons int
	for n := range doc.Descendants() {
		if n.Type != html.ElementNode {
			continue
		}
		switch n.Data {
		case "html":
			if attr(n, "lang") == "" {
				t.Error("<html> without lang")
			}
		case "input", "select":
			if attr(n, "type") != "hidden" && !labelled[n] && attr(n, "aria-label") == "" {
				t.Errorf("<%s name=%q> has no label", n.Data, attr(n, "name"))
			}
		case "button":
			buttons++
			if strings.TrimSpace(text(n)) == "" && attr(n, "aria-label") == "" {
				t.Error("a button without a name")
			}
		case "table":
			tables++
			hasCaption := false
			for c := range n.Descendants() {
				hasCaption = hasCaption || (c.Type == html.ElementNode && c.Data == "caption")
				if c.Type == html.ElementNode && c.Data == "th" && attr(c, "scope") == "" {
					t.Errorf("<th> %q without scope", strings.TrimSpace(text(c)))
				}
			}
			if !hasCaption {
				t.Error("a table without a caption")
			}
		}
	}
	if tables != 1 || buttons < 4 {
		t.Errorf("%d tables, %d buttons; want the hosts table and its buttons", tables, buttons)
	}
}
