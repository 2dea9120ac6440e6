package admin

// The status page's view of the journal: a host's recent
// webhooks, a webhook's attempts with the partner's answers, and a purge
// of the host's queue that asks for confirmation.
//
//	GET  /messages?host=&state=&cursor=   recent webhooks, newest first
//	GET  /messages/{id}                   one webhook and its attempts
//	POST /ui/queue/purge                  host=, confirm=1 to do it

import (
	"crypto/subtle"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/journal"
	"github.com/hookpace/hookpace/spool"
)

// routeMessagePage adds the journal's pages to mux.
func (a *api) routeMessagePage(mux *http.ServeMux) {
	mux.HandleFunc("GET /messages", a.messagesPage)
	mux.HandleFunc("GET /messages/{id}", a.messagePage)
	mux.HandleFunc("POST /ui/queue/purge", a.purgePage)
}

var messageTmpl = template.Must(template.New("messages").Funcs(template.FuncMap{
	"when": func(m Message) string { return m.AcceptedAt.Local().Format("2006-01-02 15:04:05.000") },
	"stamp": func(t *time.Time) string {
		if t == nil {
			return "?"
		}
		return t.Local().Format("2006-01-02 15:04:05.000")
	},
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>hookpace · {{.Title}}</title>
<link rel="stylesheet" href="/static/page.css"></head>
<body><main>
<p><a href="/">← status</a>{{if .Host}} · <a href="/messages?host={{.Host}}">{{.Host}}</a>{{end}}</p>
<h1>{{.Title}}</h1>
{{- if .Error}}<p class="err">{{.Error}}</p>{{end}}
{{- with .One}}
<dl class="facts">
  <div><dt>State</dt><dd id="msg-state">{{.State}}{{if .Position}} (position {{.Position}} in its host's queue){{end}}</dd></div>
  {{- if .Reason}}<div><dt>Reason</dt><dd>{{.Reason}}</dd></div>{{end}}
  <div><dt>Request</dt><dd>{{.Method}} {{.URL}} ({{.Bytes}} bytes)</dd></div>
  <div><dt>Accepted</dt><dd>{{when .}}</dd></div>
  {{- if .Idempotency}}<div><dt>Idempotency-Key</dt><dd>{{.Idempotency}}</dd></div>{{end}}
  {{- if .Coalesce}}<div><dt>Coalesce key</dt><dd id="msg-coalesce">{{.Coalesce}}{{if .Replaced}} (content replaced {{.Replaced}} time{{if gt .Replaced 1}}s{{end}}, last at {{stamp .ReplacedAt}}){{end}}</dd></div>{{end}}
  <div><dt>Lane</dt><dd id="msg-lane">{{if .Fairness}}fairness key {{.Fairness}} · {{end}}priority {{.Priority}}{{if .Ordering}} · ordering key {{.Ordering}}{{end}}{{if .NotBefore}} · not before {{stamp .NotBefore}}{{end}}</dd></div>
</dl>
{{- with $.Copies}}
<h2>Copies of inbound webhook {{(index . 0).Webhook}}</h2>
<table id="copies"><thead><tr><th scope="col">Target</th><th scope="col">Webhook</th><th scope="col">Host</th><th scope="col">State</th><th scope="col">Reason</th></tr></thead><tbody>
{{- range .}}
<tr><td>{{.Target}}</td><td><a href="/messages/{{.ID}}">{{.ID}}</a>{{if .This}} (this one){{end}}</td><td>{{.Host}}</td><td>{{.State}}</td><td>{{.Reason}}</td></tr>
{{- end}}
</tbody></table>
{{- end}}
<h2>Request headers</h2>
<table id="request-headers"><tbody>
{{- range $k, $v := .Header}}
<tr><th scope="row">{{$k}}</th><td>{{range $i, $x := $v}}{{if $i}}, {{end}}{{$x}}{{end}}</td></tr>
{{- else}}<tr><td class="muted">none kept</td></tr>{{end}}
</tbody></table>
<h2>Attempts</h2>
<table id="attempts"><thead><tr><th scope="col">#</th><th scope="col">At</th><th scope="col" class="num">ms</th><th scope="col" class="num">Status</th><th scope="col">Error</th><th scope="col">Partner's answer</th></tr></thead><tbody>
{{- range $i, $a := .Attempts}}
<tr><td>{{$i}}</td><td>{{$a.At.Local.Format "15:04:05.000"}}</td><td class="num">{{printf "%.1f" $a.DurationMS}}</td><td class="num">{{if $a.Status}}{{$a.Status}}{{else}}–{{end}}</td><td class="err">{{$a.Error}}</td>
<td>{{range $k, $v := $a.Header}}<span class="muted small">{{$k}}: {{index $v 0}}</span><br>{{end}}<pre>{{$a.Response}}</pre></td></tr>
{{- else}}<tr><td colspan="6" class="muted">none yet</td></tr>{{end}}
</tbody></table>
{{- end}}
{{- if .List}}
{{- if .Host}}
<form method="post" action="/ui/queue/purge"><input type="hidden" name="csrf_token" value="{{.Token}}"><input type="hidden" name="host" value="{{.Host}}"><button type="submit">Purge {{.Host}}'s queue…</button></form>
{{- end}}
<table id="messages"><thead><tr><th scope="col">Webhook</th><th scope="col">Host</th><th scope="col">State</th><th scope="col">Accepted</th><th scope="col">Reason</th><th scope="col">URL</th></tr></thead><tbody>
{{- range .List}}
<tr><td><a href="/messages/{{.ID}}">{{.ID}}</a></td><td>{{.Host}}</td><td>{{.State}}</td><td>{{when .}}</td><td>{{.Reason}}</td><td>{{.URL}}</td></tr>
{{- else}}<tr><td colspan="6" class="muted">none</td></tr>{{end}}
</tbody></table>
{{- if .Next}}<p><a href="{{.Next}}">older</a></p>{{end}}
{{- end}}
{{- with .Confirm}}
<form method="post" action="/ui/queue/purge"><input type="hidden" name="csrf_token" value="{{$.Token}}"><input type="hidden" name="host" value="{{$.Host}}"><input type="hidden" name="confirm" value="1">
<p>Drop every webhook queued for <strong>{{$.Host}}</strong> ({{.}} now) for good? Nothing purged is delivered afterwards.</p>
<button type="submit" id="confirm-purge">Purge</button> <a href="/messages?host={{$.Host}}">cancel</a></form>
{{- end}}
</main></body></html>
`))

type messagePageData struct {
	Title, Host, Error, Next, Token string
	One                             *Message
	List                            []Message
	Confirm                         string // the purge to confirm: how many are queued
	Copies                          []inboundCopy
}

func (a *api) renderMessages(w http.ResponseWriter, status int, d messagePageData) {
	setPageHeaders(w.Header())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	d.Token = a.Guard.FormToken()
	if err := messageTmpl.Execute(w, d); err != nil {
		a.Logger.Warn("messages page", "err", err)
	}
}

func (a *api) messagesPage(w http.ResponseWriter, r *http.Request) {
	j := a.Journal
	q, err := messageQuery(r)
	d := messagePageData{Title: "Webhooks", Host: q.Host, List: []Message{}}
	if d.Host != "" {
		d.Title = "Webhooks for " + d.Host
	}
	if err != nil {
		d.Error = err.Error()
		a.renderMessages(w, http.StatusBadRequest, d)
		return
	}
	q.Limit = 100
	entries, next, err := j.List(q)
	if err != nil {
		d.Error = err.Error()
	}
	for _, e := range entries {
		d.List = append(d.List, a.messageOf(j, e, e.Outcome))
	}
	if !next.IsZero() {
		v := r.URL.Query()
		v.Set("cursor", next.String())
		d.Next = "/messages?" + v.Encode()
	}
	a.renderMessages(w, http.StatusOK, d)
}

func (a *api) messagePage(w http.ResponseWriter, r *http.Request) {
	d := messagePageData{Title: "Webhook " + r.PathValue("id")}
	j := a.Journal
	ref, err := spool.ParseRef(r.PathValue("id"))
	var v *journal.View
	switch {
	case err == nil:
		v, err = j.Lookup(ref)
	}
	if err != nil {
		d.Error = err.Error()
		a.renderMessages(w, http.StatusNotFound, d)
		return
	}
	m := a.messageOf(j, &v.Entry, v.State)
	m.Position = v.Position
	for _, at := range v.Attempts {
		m.Attempts = append(m.Attempts, attemptOf(at))
	}
	d.One, d.Host = &m, m.Host
	d.Copies = a.inboundCopies(j, &v.Entry, m.ID)
	a.renderMessages(w, http.StatusOK, d)
}

// maxCopies bounds the copies a webhook's page lists: a route has a few
// targets.
const maxCopies = 100

// inboundCopy is one target's copy of a webhook an inbound route fanned
// out, as a copy's page lists it.
type inboundCopy struct {
	Webhook, Target, ID, Host, State, Reason string
	This                                     bool
}

// inboundCopies are the copies of the webhook that e (whose id is id) is
// one of, found in the journal by the door's webhook id they share; nil
// for a webhook no route fanned out.
func (a *api) inboundCopies(j Journal, e *journal.Entry, id string) []inboundCopy {
	wh := http.Header(e.Header).Get(spool.HeaderDoorWebhook)
	if wh == "" {
		return nil
	}
	entries, _, err := j.List(journal.Query{Contains: wh, Limit: maxCopies})
	if err != nil {
		return nil
	}
	var out []inboundCopy
	for _, le := range entries {
		v, err := j.Lookup(spool.Ref{Spool: j.Instance(), Seq: le.ID}) // a listing has no headers
		if err != nil {
			continue
		}
		h := http.Header(v.Entry.Header)
		if h.Get(spool.HeaderDoorWebhook) != wh {
			continue // the id in its body or another header, not its mark
		}
		m := a.messageOf(j, &v.Entry, v.State)
		out = append(out, inboundCopy{Webhook: wh, Target: h.Get(spool.HeaderDoorTarget), ID: m.ID, Host: m.Host,
			State: m.State, Reason: m.Reason, This: m.ID == id})
	}
	return out
}

// purgePage purges a host's queue from the page: the first post asks
// for confirmation, the second (confirm=1) purges.
func (a *api) purgePage(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if why := a.Guard.CheckWrite(r); why != "" || subtle.ConstantTimeCompare([]byte(r.PostFormValue(FormTokenField)), []byte(a.Guard.FormToken())) != 1 {
		http.Error(w, "refused: missing or stale form token: reload the page "+why, http.StatusForbidden)
		return
	}
	host, err := HostKey(r.PostFormValue("host"))
	if err != nil {
		http.Error(w, "which host? (form field host): "+err.Error(), http.StatusBadRequest)
		return
	}
	d := messagePageData{Title: "Purge " + host, Host: host}
	st, _ := a.Hosts.Host(host)
	if r.PostFormValue("confirm") != "1" {
		d.Confirm = strconv.FormatInt(st.Queued, 10)
		a.renderMessages(w, http.StatusOK, d)
		return
	}
	b := a.Hosts
	sel := deliver.Selection{By: "the status page from " + r.RemoteAddr}
	res, err := b.Purge(host, sel)
	a.Logger.Info("queue purged", "host", host, "by", sel.By, "count", res.Done, "in_flight", res.InFlight)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	v := url.Values{"host": {host}, "done": {"purged " + strconv.Itoa(res.Done)}}
	http.Redirect(w, r, "/?"+v.Encode(), http.StatusSeeOther)
}
