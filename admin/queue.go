package admin

// Backlog control:
//
//	GET  /v1/queue?host=H&limit=N                 H's queue, oldest first, with ages
//	POST /v1/queue/purge?host=H[&older_than=D][&id=ID...]   drop for good, in memory too
//	POST /v1/queue/bury?host=H[&older_than=D][&id=ID...]    move to the dead letters

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/spool"
)

// Backlog is the dispatcher's backlog control; *deliver.Dispatcher is one.
type Backlog interface {
	Purge(host string, sel deliver.Selection) (deliver.BacklogResult, error)
	BuryQueue(host string, sel deliver.Selection) (deliver.BacklogResult, error)
}

// QueuedMessage is one queued webhook as GET /v1/queue shows it.
type QueuedMessage struct {
	ID         string    `json:"id"`
	Position   int       `json:"position"`
	Method     string    `json:"method"`
	URL        string    `json:"url"`
	Bytes      int       `json:"bytes"`
	EnqueuedAt time.Time `json:"enqueued_at"`
	AgeMS      int64     `json:"age_ms"`
	Attempts   int       `json:"attempts"`
	LastStatus int       `json:"last_status,omitempty"`
	LastError  string    `json:"last_error,omitempty"`
}

// QueueList is the answer to GET /v1/queue.
type QueueList struct {
	Host     string          `json:"host"`
	Queued   int64           `json:"queued"`
	Messages []QueuedMessage `json:"messages"`
}

func (a *api) listQueue(w http.ResponseWriter, r *http.Request) {
	host, err := HostKey(r.URL.Query().Get("host"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "host: "+err.Error())
		return
	}
	limit := 100
	if s := r.URL.Query().Get("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil || limit < 1 || limit > 10000 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("bad limit %q (1 to 10000)", s))
			return
		}
	}
	ms, err := a.Spool.Queued(host, limit)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	out := QueueList{Host: host, Messages: make([]QueuedMessage, 0, len(ms))}
	if st, ok := a.Hosts.Host(host); ok {
		out.Queued = st.Queued
	}
	now := time.Now()
	for i, m := range ms {
		out.Messages = append(out.Messages, QueuedMessage{ID: m.Ref().String(), Position: i + 1, Method: m.Method,
			URL: RedactURL(m.URL), Bytes: len(m.Body), EnqueuedAt: m.Enqueued.UTC(), AgeMS: now.Sub(m.Enqueued).Milliseconds(),
			Attempts: m.Attempts, LastStatus: m.LastStatus, LastError: m.LastError})
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *api) purgeQueue(w http.ResponseWriter, r *http.Request) { a.takeQueue(w, r, false) }
func (a *api) buryQueue(w http.ResponseWriter, r *http.Request)  { a.takeQueue(w, r, true) }

func (a *api) takeQueue(w http.ResponseWriter, r *http.Request, bury bool) {
	b := a.Hosts
	q := r.URL.Query()
	host, err := HostKey(q.Get("host"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "host: "+err.Error())
		return
	}
	sel := deliver.Selection{By: who(r, a.Guard)}
	if s := q.Get("older_than"); s != "" {
		if sel.OlderThan, err = time.ParseDuration(s); err != nil || sel.OlderThan <= 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("bad older_than %q (a duration, like 1h)", s))
			return
		}
	}
	for _, s := range q["id"] {
		ref, err := spool.ParseRef(s)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		sel.IDs = append(sel.IDs, ref)
	}
	do, verb := b.Purge, "purged"
	if bury {
		do, verb = b.BuryQueue, "buried"
	}
	res, err := do(host, sel)
	a.Logger.Info("queue "+verb, "host", host, "by", sel.By, "count", res.Done, "in_flight", res.InFlight,
		"older_than", sel.OlderThan.String(), "ids", len(sel.IDs))
	if err != nil {
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("%s %d, then: %v", verb, res.Done, err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"host": host, verb: res.Done, "in_flight": res.InFlight})
}

// who names who asked, for the log and the journal: who the client says
// it is (by=, the CLI sends user@machine), its address, and whether it
// presented the admin token.
func who(r *http.Request, g *Guard) string {
	by := "admin API from " + r.RemoteAddr
	if claim := r.URL.Query().Get("by"); claim != "" && len(claim) <= 100 && utf8.ValidString(claim) {
		by = claim + " via " + by
	}
	if g.TokenPresented(r) {
		by += " with the admin token"
	}
	return by
}
