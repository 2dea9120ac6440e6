package admin

import (
	"cmp"
	"crypto/subtle"
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/spool"
)

// The status page: GET / renders the spool and the hosts as HTML from
// page.html; its forms POST to /ui/{pause,resume,replay} and are sent
// back to the page (303) with what was done. Everything it needs is
// embedded: it works offline and loads nothing from elsewhere.

//go:embed page.html
var pageHTML string

//go:embed static
var staticFS embed.FS

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"pct":        func(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + "%" },
	"perOptions": func() []int { return []int{50, 100, 500, 5000} },
	"num":        num,
	"breakable":  breakable,
	"barWidth": func(f float64) string {
		return strconv.FormatFloat(100*min(max(f, 0), 1), 'f', 2, 64) + "%"
	},
	"level": func(f, low, high float64) string {
		switch {
		case f >= high:
			return "bad"
		case f >= low:
			return "warn"
		}
		return "ok"
	},
}).Parse(pageHTML))

// breakable is a host name that a narrow column breaks after its dots
// and colons, never inside a label: "partner-c.test" may wrap as
// "partner-c." and "test", never as "partn" and "er-c.test".
func breakable(host string) template.HTML {
	var b strings.Builder
	for _, r := range host {
		b.WriteString(template.HTMLEscapeString(string(r)))
		if r == '.' || r == ':' {
			b.WriteString("<wbr>")
		}
	}
	return template.HTML(b.String())
}

// page serves the status page and its actions.
type page struct {
	api   *api
	token string // anti-forgery token of the page's forms, new at every start
	now   func() time.Time
}

func (a *api) routePage(mux *http.ServeMux) *page {
	a.Options = withDefaults(a.Options)
	p := &page{api: a, token: a.Guard.FormToken(), now: time.Now}
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", p.show)
	mux.HandleFunc("POST /ui/{action}", p.act)
	return p
}

// pageQuery is what the page was asked to show.
type pageQuery struct {
	Sort   string // "queued" (most first), "oldest" (oldest first) or "host"
	Filter string // substring of the host name
	Show   string // "all", "backlog" (queued > 0) or "attention" (held, paused, breaker, dead letters)
	Page   int    // from 1
	Per    int    // rows a page
}

func readQuery(q url.Values) pageQuery {
	pq := pageQuery{Sort: q.Get("sort"), Filter: strings.ToLower(strings.TrimSpace(q.Get("q"))), Show: q.Get("show")}
	if pq.Sort != "oldest" && pq.Sort != "host" {
		pq.Sort = "queued"
	}
	if pq.Show != "backlog" && pq.Show != "attention" {
		pq.Show = "all"
	}
	pq.Page, _ = strconv.Atoi(q.Get("page"))
	pq.Page = max(pq.Page, 1)
	pq.Per, _ = strconv.Atoi(q.Get("per"))
	if pq.Per <= 0 {
		pq.Per = 100
	}
	pq.Per = min(pq.Per, 5000)
	return pq
}

// values is the query string that shows pq (defaults left out).
func (pq pageQuery) values() url.Values {
	v := url.Values{}
	if pq.Sort != "queued" {
		v.Set("sort", pq.Sort)
	}
	if pq.Filter != "" {
		v.Set("q", pq.Filter)
	}
	if pq.Show != "all" {
		v.Set("show", pq.Show)
	}
	if pq.Page > 1 {
		v.Set("page", strconv.Itoa(pq.Page))
	}
	if pq.Per != 100 {
		v.Set("per", strconv.Itoa(pq.Per))
	}
	return v
}

func (pq pageQuery) url(change func(*pageQuery)) string {
	c := pq
	change(&c)
	if s := c.values().Encode(); s != "" {
		return "/?" + s
	}
	return "/"
}

func (p *page) show(w http.ResponseWriter, r *http.Request) {
	pq := readQuery(r.URL.Query())
	data := p.build(pq, p.now())
	data.Done = doneMessage(r.URL.Query())
	setPageHeaders(w.Header())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := pageTmpl.Execute(w, data); err != nil {
		p.api.Logger.Warn("status page", "err", err)
	}
}

func setPageHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	// Not no-referrer: with it, Chromium sends "Origin: null" with the
	// page's own form posts, which the same-origin check must refuse.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// build gathers what the page shows at now.
func (p *page) build(pq pageQuery, now time.Time) *pageData {
	a := p.api
	// Every host with a backlog needs its oldest message's age: the
	// spool's oldest is the oldest of them, and "sort by oldest" orders
	// them all.
	snap := TakeSnapshot(a.Hosts, a.Spool, now, true)
	rows := make([]hostRow, 0, len(snap.Hosts))
	for _, h := range snap.Hosts {
		row := hostRow{HostStatus: h, Dead: snap.Dead[h.Host]}
		row.Oldest = snap.Oldest[h.Host]
		if pq.keep(&row) {
			rows = append(rows, row)
		}
	}
	sortRows(rows, pq.Sort)
	d := &pageData{Now: now, Query: pq, Token: p.token, Problems: snap.Problems, Matched: len(rows), Known: len(snap.Hosts)}
	d.Spool = newSpoolView(snap.Usage, a.journalUsage(), snap.Oldest, now)
	d.Fleet = snap.Fleet // in memory, as /v1/hosts: no Redis round trip
	if a.Replication != nil {
		r := a.Replication()
		d.Replication = &r
	}
	if a.Instance != nil {
		if d.HTTPS = a.Instance().HTTPS; d.HTTPS != nil {
			for _, t := range d.HTTPS.Tunnels {
				if t.Mode != "intercepted" {
					d.Unpaced = append(d.Unpaced, t)
				}
			}
		}
	}
	d.Pages = max(1, (len(rows)+pq.Per-1)/pq.Per)
	d.Query.Page = min(pq.Page, d.Pages)
	start := (d.Query.Page - 1) * pq.Per
	d.Charts = newChartsView(a.History)
	var buf []byte
	for _, row := range rows[start:min(start+pq.Per, len(rows))] {
		v := row.view(now)
		v.Trend, buf = a.History.trendHTML(row.Host, buf)
		d.Hosts = append(d.Hosts, v)
	}
	d.links()
	return d
}

// keep reports whether row passes pq's filter.
func (pq pageQuery) keep(row *hostRow) bool {
	if pq.Filter != "" && !strings.Contains(row.Host, pq.Filter) {
		return false
	}
	switch pq.Show {
	case "backlog":
		return row.Queued > 0
	case "attention":
		return row.Paused || row.HeldUntil != nil || row.Breaker != "closed" || row.Dead > 0
	}
	return true
}

type hostRow struct {
	deliver.HostStatus
	Dead   int64
	Oldest time.Time // zero: nothing queued
}

func sortRows(rows []hostRow, by string) {
	slices.SortStableFunc(rows, func(a, b hostRow) int {
		switch by {
		case "oldest":
			// Oldest first; hosts with nothing queued last.
			if a.Oldest.IsZero() != b.Oldest.IsZero() {
				if a.Oldest.IsZero() {
					return 1
				}
				return -1
			}
			if c := a.Oldest.Compare(b.Oldest); c != 0 {
				return c
			}
		case "queued":
			if c := cmp.Compare(b.Queued, a.Queued); c != 0 {
				return c
			}
		}
		return strings.Compare(a.Host, b.Host)
	})
}

// act runs one of the page's forms: pause, resume or replay (the host's
// dead letters), and sends the browser back to the page it came from.
func (p *page) act(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if why := p.refuse(r); why != "" {
		p.api.Logger.Warn("status page action refused", "action", r.PathValue("action"), "reason", why,
			"origin", r.Header.Get("Origin"), "remote", r.RemoteAddr)
		http.Error(w, "refused: "+why, http.StatusForbidden)
		return
	}
	host, err := HostKey(r.PostFormValue("host"))
	if err != nil {
		http.Error(w, "which host? (form field host): "+err.Error(), http.StatusBadRequest)
		return
	}
	done, err := p.do(r.PathValue("action"), host)
	if err != nil {
		code := http.StatusServiceUnavailable
		if _, bad := err.(badAction); bad {
			code = http.StatusBadRequest
		}
		http.Error(w, err.Error(), code)
		return
	}
	back, _ := url.ParseQuery(r.PostFormValue("back"))
	pq := readQuery(back)
	v := pq.values()
	v.Set("done", done)
	v.Set("host", host)
	http.Redirect(w, r, "/?"+v.Encode(), http.StatusSeeOther)
}

type badAction string

func (e badAction) Error() string { return string(e) }

// do carries out action on host and says what was done.
func (p *page) do(action, host string) (string, error) {
	a := p.api
	switch action {
	case "pause":
		if why := a.pauseLimit(host); why != "" {
			return "", badAction(why)
		}
		if err := a.Hosts.Pause(host); err != nil {
			return "", err
		}
		return "paused", nil
	case "resume":
		known, err := a.Hosts.Resume(host)
		if err != nil {
			return "", err
		}
		if !known {
			return "", badAction("resume of an unknown host " + host)
		}
		return "resumed", nil
	case "replay":
		n, err := a.Spool.ReplayDead(spool.DeadFilter{Host: host})
		if err != nil {
			return "", err
		}
		a.Logger.Info("dead letters replayed", "count", n, "host", host, "ids", 0)
		st, _ := a.Hosts.Host(host)
		if note := queuedAgainNote(host, st, time.Now(), "this replay"); note != "" && n > 0 {
			return "replayed " + strconv.Itoa(n) + "; " + note, nil
		}
		return "replayed " + strconv.Itoa(n), nil
	}
	return "", badAction("unknown action " + strconv.Quote(action))
}

// refuse says why a form post must not be acted on, or "": it must come
// from this page (not another site: Sec-Fetch-Site, Origin) and carry the
// page's token, which another site cannot read.
func (p *page) refuse(r *http.Request) string {
	// Guard.Wrap has checked this already; checked again here so that the
	// page never depends on being wrapped.
	if why := p.api.Guard.CheckWrite(r); why != "" {
		return why
	}
	if t := r.PostFormValue(formTokenField); t == "" || subtle.ConstantTimeCompare([]byte(t), []byte(p.token)) != 1 {
		return "missing or stale form token: reload the page"
	}
	return ""
}

const formTokenField = FormTokenField
