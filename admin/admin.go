// Package admin serves hookpace's admin API on the admin listener
// (localhost by default) and is the client the CLI uses to talk to it.
//
//	GET    /healthz                alive
//	GET    /readyz                 spool open, below its high-water mark, and writable
//	GET    /metrics                Prometheus text (OpenTelemetry exporter)
//	GET    /v1/hosts?host=&limit=&cursor=  known hosts' pacing state, by name,
//	                                  a page at a time (hostpage.go)
//	GET    /v1/hosts?scope=fleet&limit=&cursor=  the fleet's view (fleetview.go)
//	GET    /v1/hosts/{host}        one host
//	POST   /v1/hosts/{host}/pause  stop sending to host
//	POST   /v1/hosts/{host}/resume
//	GET    /v1/spool               usage, watermarks, accepting or not
//	GET    /v1/instance            pid, start time, spool directory, listeners, ingest counts
//	GET    /v1/dead?host=&id=&limit=&body=1&whole=1  dead letters (URL query values and
//	                                  credential headers redacted unless whole=1)
//	POST   /v1/dead/replay?all=1|host=|id=  back into their queues
//	POST   /v1/dead/purge?all=1|host=|id=   delete for good
//	GET    /v1/messages/{id}       one webhook from the journal: state, attempts (messages.go)
//	GET    /v1/messages?host=&state=&since=&until=&limit=&cursor=  newest first
//	GET    /v1/queue?host=&limit=  a host's queue, oldest first (queue.go)
//	POST   /v1/queue/purge?host=[&older_than=][&id=]  drop queued webhooks, in memory too
//	POST   /v1/queue/bury?host=[&older_than=][&id=]   move them to the dead letters
//	GET    /                       the status page (page.go); its forms POST to /ui/...
//
// Every request passes the Guard first (guard.go): Host checked on every
// path, the bearer token when one is configured, and state-changing
// requests refused when they come from another site or could have been
// sent by a plain HTML form.
package admin

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/journal"
	"github.com/hookpace/hookpace/replicate"
	"github.com/hookpace/hookpace/spool"
)

// Hosts is the dispatcher's side of the API. Pause and Resume also record
// the change durably, so that it holds across a restart.
type Hosts interface {
	Hosts() []deliver.HostStatus
	// HostNames lists the hosts known, and HostsNamed reports those
	// named: a page of GET /v1/hosts builds only its own hosts' status.
	HostNames() []string
	HostsNamed(names []string) []deliver.HostStatus
	Host(name string) (deliver.HostStatus, bool)
	Pause(name string) error
	Resume(name string) (known bool, err error)
	Fleet() *deliver.FleetStatus // nil without a fleet
	Backlog
}

var _ Hosts = (*deliver.Dispatcher)(nil)

// Spool is the spool's side of the API.
type Spool interface {
	Usage() spool.Usage
	Accepting() bool
	ListDead(f spool.DeadFilter, limit int) ([]*spool.Dead, int, error)
	ReplayDead(f spool.DeadFilter) (int, error)
	PurgeDead(f spool.DeadFilter) (int, error)
	// Oldest is when host's oldest queued webhook was accepted;
	// DeadByHost counts dead letters by host (the page).
	Oldest(host string) (time.Time, bool, error)
	DeadByHost() (map[string]int64, error)
	// Queued lists host's queue, oldest first (GET /v1/queue).
	Queued(host string, max int) ([]*spool.Message, error)
}

var _ Spool = (*spool.Spool)(nil)

// Options configure the admin handler.
type Options struct {
	Hosts Hosts
	Spool Spool
	// Journal answers the webhooks' histories (GET /v1/messages, the
	// message pages) and sends a delivered one again.
	Journal Journal
	Metrics http.Handler // nil: no /metrics
	Logger  *slog.Logger
	// Guard checks every request (see Guard); nil: loopback Hosts only,
	// no token.
	Guard *Guard
	// Configured reports whether a host has its own entry in the config;
	// nil: none has.
	Configured func(host string) bool
	// MaxPaused bounds the paused hosts that are not Configured; 0 means
	// DefaultMaxPaused.
	MaxPaused int
	// Stopping, if set, reports that hookpace is shutting down: /readyz
	// fails from then on.
	Stopping func() bool
	// Instance, if set, says which hookpace this is (GET /v1/instance).
	Instance func() Instance
	// History, if set, is what the status page charts: the spool's and
	// each host's last 15 minutes (history.go); nil: no charts.
	History *History
	// Fleet, in fleet mode, is the fleet's view (GET /v1/hosts?scope=fleet,
	// fleetview.go); nil: none.
	Fleet FleetView
	// Replication, with spool.replicate, reports the spool's copy off this
	// node (GET /v1/spool's replication); nil: none.
	Replication func() replicate.Status
}

// SpoolView is GET /v1/spool: the spool's usage and admission state, and
// its replication when there is one.
type SpoolView struct {
	spool.Usage
	Journal     journal.Usage     `json:"journal"`
	Replication *replicate.Status `json:"replication,omitempty"`
}

func (a *api) spoolView() SpoolView {
	v := SpoolView{Usage: a.Spool.Usage(), Journal: a.journalUsage()}
	if a.Replication != nil {
		s := a.Replication()
		v.Replication = &s
	}
	return v
}

// journalUsage is what the journal holds against its budget; off
// without one.
func (a *api) journalUsage() journal.Usage {
	if a.Journal == nil {
		return journal.Usage{Off: true}
	}
	return a.Journal.JournalUsage()
}

// Handler returns the admin API.
func Handler(o Options) http.Handler {
	a := &api{withDefaults(o)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", a.ready)
	if o.Metrics != nil {
		mux.Handle("GET /metrics", o.Metrics)
	}
	mux.HandleFunc("GET /v1/hosts", a.hosts)
	mux.HandleFunc("GET /v1/hosts/{host}", a.host)
	mux.HandleFunc("POST /v1/hosts/{host}/pause", a.pause)
	mux.HandleFunc("POST /v1/hosts/{host}/resume", a.resume)
	mux.HandleFunc("GET /v1/instance", a.instance)
	mux.HandleFunc("GET /v1/spool", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, a.spoolView()) })
	mux.HandleFunc("GET /v1/dead", a.listDead)
	mux.HandleFunc("POST /v1/dead/replay", a.replayDead)
	mux.HandleFunc("POST /v1/dead/purge", a.purgeDead)
	mux.HandleFunc("GET /v1/messages", a.listMessages) // messages.go
	mux.HandleFunc("GET /v1/messages/{id}", a.message)
	mux.HandleFunc("POST /v1/messages/{id}/resend", a.resendMessage)
	mux.HandleFunc("GET /v1/queue", a.listQueue) // queue.go
	mux.HandleFunc("POST /v1/queue/purge", a.purgeQueue)
	mux.HandleFunc("POST /v1/queue/bury", a.buryQueue)
	a.routePage(mux)
	a.routeMessagePage(mux) // messagepage.go
	return a.Guard.Wrap(mux)
}

type api struct{ Options }

func withDefaults(o Options) Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Guard == nil {
		o.Guard = NewGuard(Access{})
	}
	if o.Configured == nil {
		o.Configured = func(string) bool { return false }
	}
	if o.MaxPaused <= 0 {
		o.MaxPaused = DefaultMaxPaused
	}
	return o
}

func (a *api) ready(w http.ResponseWriter, r *http.Request) {
	if ok, why := a.Spool.Usage().Ready(a.Stopping != nil && a.Stopping()); !ok {
		writeError(w, http.StatusServiceUnavailable, "not ready: "+why)
		return
	}
	w.Write([]byte("ready\n"))
}

func (a *api) host(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("host")
	if k, err := HostKey(name); err == nil {
		name = k
	}
	st, ok := a.Hosts.Host(name)
	if !ok {
		writeError(w, http.StatusNotFound, "no such host: "+r.PathValue("host"))
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// pause stops sending to a host until resume, across restarts.
func (a *api) pause(w http.ResponseWriter, r *http.Request) {
	host, err := HostKey(r.PathValue("host"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if reason := a.pauseLimit(host); reason != "" {
		writeError(w, http.StatusConflict, reason)
		return
	}
	if err := a.Hosts.Pause(host); err != nil {
		writeError(w, http.StatusServiceUnavailable, "not paused: "+err.Error())
		return
	}
	st, _ := a.Hosts.Host(host)
	writeJSON(w, http.StatusOK, st)
}

// pauseLimit says why host may not be paused, or "": a host that is not
// in the config may be paused only while fewer than MaxPaused such hosts
// are.
func (a *api) pauseLimit(host string) string {
	if a.Configured(host) {
		return ""
	}
	n := 0
	for _, h := range a.Hosts.Hosts() {
		if h.Host == host && h.Paused {
			return ""
		}
		if h.Paused && !a.Configured(h.Host) {
			n++
		}
	}
	if n >= a.MaxPaused {
		return fmt.Sprintf("%d hosts not in the config are paused already (the most there may be); resume some first", n)
	}
	return ""
}

func (a *api) resume(w http.ResponseWriter, r *http.Request) {
	host, err := HostKey(r.PathValue("host"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	known, err := a.Hosts.Resume(host)
	switch {
	case !known:
		writeError(w, http.StatusNotFound, "no such host: "+host)
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, "not resumed: "+err.Error())
		return
	}
	st, _ := a.Hosts.Host(host)
	writeJSON(w, http.StatusOK, st)
}

// DeadLetter is a dead letter as the API shows it.
type DeadLetter struct {
	ID         string              `json:"id"`
	Host       string              `json:"host"`
	Method     string              `json:"method"`
	URL        string              `json:"url"`
	Reason     string              `json:"reason"`
	Status     int                 `json:"last_status"`
	Error      string              `json:"last_error"`
	Attempts   int                 `json:"attempts"`
	Enqueued   time.Time           `json:"enqueued_at"`
	LastTry    time.Time           `json:"last_attempt_at,omitzero"`
	DiedAt     time.Time           `json:"died_at"`
	Bytes      int                 `json:"bytes"`
	Header     map[string][]string `json:"header,omitempty"`
	BodyValue  string              `json:"body,omitempty"`
	BodyBase64 []byte              `json:"body_base64,omitempty"` // instead of body when it is not UTF-8
}

// DeadList is the answer to GET /v1/dead.
type DeadList struct {
	Total int          `json:"total"`
	Dead  []DeadLetter `json:"dead"`
}

func (a *api) listDead(w http.ResponseWriter, r *http.Request) {
	f, err := filter(r, false)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 0 {
			writeError(w, http.StatusBadRequest, "bad limit "+strconv.Quote(v))
			return
		}
	}
	body := r.URL.Query().Get("body") == "1"
	// Webhook URLs and headers often carry credentials: a listing hides
	// them, unless it asks for them whole (whole=1, as dead export does)
	// and holds the admin token, if one is configured.
	whole := r.URL.Query().Get("whole") == "1" && a.Guard.Authorized(r)
	dead, total, err := a.Spool.ListDead(f, limit)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	out := DeadList{Total: total, Dead: make([]DeadLetter, 0, len(dead))}
	for _, d := range dead {
		m := d.Message
		dl := DeadLetter{ID: m.Ref().String(), Host: m.Host, Method: m.Method, URL: m.URL, Reason: d.Reason,
			Status: m.LastStatus, Error: m.LastError, Attempts: m.Attempts, Enqueued: m.Enqueued.UTC(),
			LastTry: m.LastTry.UTC(), DiedAt: d.DiedAt.UTC(), Bytes: len(m.Body)}
		if body {
			dl.Header = m.Header
			if utf8.Valid(m.Body) {
				dl.BodyValue = string(m.Body)
			} else {
				dl.BodyBase64 = m.Body // JSON would replace the invalid bytes
			}
		}
		if !whole {
			dl.URL, dl.Header = RedactURL(dl.URL), RedactHeader(dl.Header)
		}
		out.Dead = append(out.Dead, dl)
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *api) purgeDead(w http.ResponseWriter, r *http.Request) {
	a.bulk(w, r, "purged", func(f spool.DeadFilter) (int, any, error) {
		n, err := a.Spool.PurgeDead(f)
		return n, map[string]int{"purged": n}, err
	})
}

// bulk runs do on the dead letters r selects, once every id it names is
// found; do says how many it took and what to answer.
func (a *api) bulk(w http.ResponseWriter, r *http.Request, verb string, do func(spool.DeadFilter) (int, any, error)) {
	f, err := filter(r, true)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if missing, err := a.missingDead(f); err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	} else if len(missing) > 0 {
		// A mistyped or stale id must not look like success: nothing is
		// done, so that the command can be corrected and run again.
		writeError(w, http.StatusNotFound, fmt.Sprintf("no dead letter with id %s%s: nothing %s",
			strings.Join(missing, ", "), onHost(f.Host), verb))
		return
	}
	n, answer, err := do(f)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	a.Logger.Info("dead letters "+verb, "count", n, "host", f.Host, "ids", len(f.IDs))
	writeJSON(w, http.StatusOK, answer)
}

// missingDead lists, as shown to users, the ids f names that match no dead
// letter.
func (a *api) missingDead(f spool.DeadFilter) ([]string, error) {
	if len(f.IDs) == 0 {
		return nil, nil
	}
	found, _, err := a.Spool.ListDead(f, 0)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, r := range f.IDs {
		if !slices.ContainsFunc(found, func(d *spool.Dead) bool { return r.Matches(d.Message.Ref()) }) {
			missing = append(missing, r.String())
		}
	}
	return missing, nil
}

func onHost(host string) string {
	if host == "" {
		return ""
	}
	return " for host " + host
}

// filter reads host= and id= (repeatable) from the query. A bulk action
// must say all=1 to act on every dead letter, so that a forgotten argument
// never purges everything.
func filter(r *http.Request, bulk bool) (spool.DeadFilter, error) {
	q := r.URL.Query()
	f := spool.DeadFilter{Host: q.Get("host")}
	for _, s := range q["id"] {
		id, err := spool.ParseRef(s)
		if err != nil {
			return f, err
		}
		f.IDs = append(f.IDs, id)
	}
	if err := window(q, &f.Since, &f.Until); err != nil {
		return f, err
	}
	if bulk && f.Host == "" && len(f.IDs) == 0 && f.Since.IsZero() && f.Until.IsZero() && q.Get("all") != "1" {
		return f, fmt.Errorf("say which dead letters: all=1, host=HOST, id=ID or since=/until=")
	}
	return f, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
