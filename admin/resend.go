package admin

// POST /v1/messages/{id}/resend: a delivered webhook queued
// again from the request the journal kept (journal.bodies).

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/hookpace/hookpace/journal"
	"github.com/hookpace/hookpace/spool"
)

// Resent is the answer to a resend: the id the webhook is delivered
// under (the first one's) and the new message that carries it.
type Resent struct {
	ID      string `json:"id"`
	Queued  string `json:"queued_as"`
	Host    string `json:"host"`
	Message string `json:"message"`
	// Next, when the host is paused or held, says what happens to the
	// webhook: it waits, and its max_age counts from the resend.
	Next string `json:"next,omitempty"`
}

func (a *api) resendMessage(w http.ResponseWriter, r *http.Request) {
	ref, err := spool.ParseRef(r.PathValue("id"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	m, err := a.Journal.Resend(r.Context(), ref)
	var full *spool.FullError
	switch {
	case isNotFound(err):
		writeError(w, http.StatusNotFound, err.Error())
		return
	case errors.As(err, &full):
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(full.RetryAfter.Seconds()))))
		writeError(w, http.StatusServiceUnavailable, "not queued: "+err.Error())
		return
	case errors.Is(err, journal.ErrNoBody):
		writeError(w, http.StatusConflict, err.Error())
		return
	case err != nil:
		writeError(w, http.StatusConflict, err.Error())
		return
	}
	by := who(r, a.Guard)
	a.Logger.Info("webhook resent", "id", m.Ref().String(), "queued_as", spool.IDString(m.ID), "host", m.Host, "by", by)
	st, _ := a.Hosts.Host(m.Host)
	writeJSON(w, http.StatusAccepted, Resent{ID: m.Ref().String(), Queued: spool.IDString(m.ID), Host: m.Host,
		Message: "queued again at the tail of its host's queue, delivered under its first id",
		Next:    queuedAgainNote(m.Host, st, m.Enqueued, "this resend")})
}

// Resend asks hookpace to send a delivered webhook again (POST
// /v1/messages/{id}/resend); by names who asks, for its log.
func (c *Client) Resend(ctx context.Context, id, by string) (Resent, error) {
	var out Resent
	q := url.Values{}
	if by != "" {
		q.Set("by", by)
	}
	err := c.do(ctx, http.MethodPost, "/v1/messages/"+url.PathEscape(id)+"/resend", q, &out)
	return out, err
}
