package admin

// The journal's API:
//
//	GET /v1/messages/{id}    one webhook: state, where it is, its attempts;
//	                         for an id of another replica, which (messages_fleet.go)
//	GET /v1/messages?host=&state=&since=&until=&limit=&cursor=   newest first
//	                 &idempotency_key=KEY   only the webhooks with that Idempotency-Key
//	                 &contains=TEXT         only those whose request holds TEXT (URL, headers,
//	                                        body), as far as it is kept (journal.Query)

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/hookpace/hookpace/journal"
	"github.com/hookpace/hookpace/spool"
)

// Journal is the history of every webhook; *spool.Spool is one.
type Journal interface {
	Lookup(r spool.Ref) (*journal.View, error)
	List(q journal.Query) ([]*journal.Entry, journal.Cursor, error)
	Instance() uint64
	// Resend queues a delivered webhook again from the request the
	// journal kept (resend.go).
	Resend(ctx context.Context, r spool.Ref) (*spool.Message, error)
	// JournalUsage is what it holds against its budget (GET /v1/spool).
	JournalUsage() journal.Usage
}

// States a webhook's lookup answers (besides the outcomes).
const (
	StateHeld = "held" // queued for a paused or held host
)

// MessageAttempt is one attempt as the API shows it.
type MessageAttempt struct {
	At             time.Time           `json:"at"`
	DurationMS     float64             `json:"duration_ms"`
	Status         int                 `json:"status,omitempty"`
	Error          string              `json:"error,omitempty"`
	Response       string              `json:"response,omitempty"`
	ResponseBase64 []byte              `json:"response_base64,omitempty"` // instead of response when not UTF-8
	Header         map[string][]string `json:"response_headers,omitempty"`
	Batch          int                 `json:"batch,omitempty"` // webhooks in the same request, when more than one
}

// Message is a webhook as GET /v1/messages shows it.
type Message struct {
	ID          string `json:"id"`
	Host        string `json:"host"`
	Method      string `json:"method"`
	URL         string `json:"url"`
	Idempotency string `json:"idempotency_key,omitempty"`
	// Coalesce is its coalesce key (dedupe.coalesce_header); Replaced
	// says how many later webhooks with it replaced its content, the
	// last at ReplacedAt.
	Coalesce   string     `json:"coalesce_key,omitempty"`
	Replaced   int        `json:"replaced,omitempty"`
	ReplacedAt *time.Time `json:"replaced_at,omitempty"`
	// Its lane: fairness key, priority, ordering key, not before.
	Fairness  string     `json:"fairness_key,omitempty"`
	Priority  string     `json:"priority"`
	Ordering  string     `json:"ordering_key,omitempty"`
	NotBefore *time.Time `json:"not_before,omitempty"`
	// Header is the request's headers as the app sent them (before any
	// credentials hookpace adds), secret values redacted; in a lookup,
	// not in a list.
	Header     map[string][]string `json:"request_headers,omitempty"`
	Bytes      int                 `json:"bytes"`
	AcceptedAt time.Time           `json:"accepted_at"`
	// RequeuedAt, in a lookup, is when a webhook replayed from the dead
	// letters or resent was queued again: its max_age counts from then.
	RequeuedAt *time.Time       `json:"requeued_at,omitempty"`
	State      string           `json:"state"`
	Position   int              `json:"position,omitempty"` // queued: 1 is the head of its host's queue
	OutcomeAt  *time.Time       `json:"outcome_at,omitempty"`
	Reason     string           `json:"reason,omitempty"`
	Attempts   []MessageAttempt `json:"attempts,omitempty"`
	// HandedOff, for a webhook handed off at a shutdown, is where it went
	// and its id there (messages_fleet.go).
	HandedOff *Elsewhere `json:"handed_off_to,omitempty"`
}

// MaxMessagesPage is the most webhooks one page of GET /v1/messages holds.
const MaxMessagesPage = 1000

// MessageList is the answer to GET /v1/messages.
type MessageList struct {
	Messages []Message `json:"messages"`
	Cursor   string    `json:"cursor,omitempty"` // the next page's
}

func (a *api) message(w http.ResponseWriter, r *http.Request) {
	j := a.Journal
	ref, err := spool.ParseRef(r.PathValue("id"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	v, err := j.Lookup(ref)
	if isNotFound(err) && ref.Spool != 0 && ref.Spool != j.Instance() {
		a.notHere(w, r, ref) // messages_fleet.go
		return
	} else if isNotFound(err) {
		writeError(w, http.StatusNotFound, err.Error())
		return
	} else if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	a.writeMessage(w, r, v)
}

// writeMessage answers with v, and for a webhook handed off, where it
// went.
func (a *api) writeMessage(w http.ResponseWriter, r *http.Request, v *journal.View) {
	m := a.messageOf(a.Journal, &v.Entry, v.State)
	m.Position = v.Position
	m.RequeuedAt = utcOrNil(v.Requeued)
	for _, at := range v.Attempts {
		m.Attempts = append(m.Attempts, attemptOf(at))
	}
	if m.State == spool.OutcomeHandedOff {
		m.HandedOff = a.handedOff(r.Context(), m.Reason)
	}
	writeJSON(w, http.StatusOK, m)
}

func (a *api) messageOf(j Journal, e *journal.Entry, state string) Message {
	ref := spool.Ref{Spool: j.Instance(), Seq: e.ID}
	if e.OriginSpool != 0 {
		ref = spool.Ref{Spool: e.OriginSpool, Seq: e.Origin}
	} else if e.Origin != 0 {
		ref.Seq = e.Origin
	}
	if state == "" {
		state = spool.StateQueued
	}
	if state == spool.StateQueued && a.held(e.Host) {
		state = StateHeld
	}
	m := Message{ID: ref.String(), Host: e.Host, Method: e.Method, URL: RedactURL(e.URL), Idempotency: e.Idempotency,
		Coalesce: e.Coalesce, Replaced: e.Replaced, ReplacedAt: utcOrNil(e.ReplacedAt),
		Fairness: e.Fairness, Priority: e.Priority.String(), Ordering: e.Ordering, NotBefore: utcOrNil(e.NotBefore),
		Header: RedactHeader(e.Header), Bytes: e.Size, AcceptedAt: e.Accepted.UTC(), State: state, Reason: e.Reason,
		OutcomeAt: utcOrNil(e.OutcomeAt)}
	return m
}

// utcOrNil is t in UTC, or nil for none.
func utcOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// held reports whether host is paused or held: its queued webhooks wait.
func (a *api) held(host string) bool {
	st, ok := a.Hosts.Host(host)
	return ok && (st.Paused || st.HeldUntil != nil)
}

func attemptOf(at *spool.Attempt) MessageAttempt {
	ma := MessageAttempt{At: at.At.UTC(), DurationMS: float64(at.Duration.Microseconds()) / 1000, Status: at.Status,
		Error: at.Error, Header: RedactHeader(at.Header)}
	if at.Batch > 1 {
		ma.Batch = at.Batch
	}
	if utf8.Valid(at.Body) {
		ma.Response = string(at.Body)
	} else {
		ma.ResponseBase64 = at.Body
	}
	return ma
}

func (a *api) listMessages(w http.ResponseWriter, r *http.Request) {
	j := a.Journal
	q, err := messageQuery(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	want := r.URL.Query().Get("state")
	entries, next, err := j.List(q)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	out := MessageList{Messages: make([]Message, 0, len(entries))}
	for _, e := range entries {
		m := a.messageOf(j, e, e.Outcome)
		if want == StateHeld && m.State != StateHeld || want == spool.StateQueued && m.State != spool.StateQueued {
			continue
		}
		out.Messages = append(out.Messages, m)
	}
	out.Cursor = next.String()
	writeJSON(w, http.StatusOK, out)
}

func messageQuery(r *http.Request) (journal.Query, error) {
	v := r.URL.Query()
	q := journal.Query{Host: v.Get("host"), State: v.Get("state"), Idempotency: v.Get("idempotency_key"), Contains: v.Get("contains")}
	if q.Host != "" {
		if k, err := HostKey(q.Host); err == nil {
			q.Host = k
		}
	}
	switch q.State {
	case "", spool.OutcomeDelivered, spool.OutcomeDead, spool.OutcomePurged, spool.OutcomeHandedOff, spool.OutcomeCoalesced:
	case spool.StateQueued, StateHeld, spool.StateInFlight:
		q.State = spool.StateQueued // told apart once found
	default:
		return q, fmt.Errorf("bad state %q", q.State)
	}
	if err := window(v, &q.Since, &q.Until); err != nil {
		return q, err
	}
	var err error
	if s := v.Get("limit"); s != "" {
		if q.Limit, err = strconv.Atoi(s); err != nil || q.Limit < 1 || q.Limit > MaxMessagesPage {
			return q, fmt.Errorf("bad limit %q (1 to %d a page; page on with cursor)", s, MaxMessagesPage)
		}
	}
	if s := v.Get("cursor"); s != "" {
		if q.Before, err = journal.ParseCursor(s); err != nil {
			return q, err
		}
	}
	return q, nil
}

// parseWhen reads a time: RFC 3339, or a duration before now.
func parseWhen(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	return time.Parse(time.RFC3339, s)
}

// journalText is the journal's line on the status page: "1,204 webhooks ·
// 1.2 MiB of 256 MiB · kept 14 days".
func journalText(j journal.Usage) string {
	if j.Off {
		return "off (journal.off)"
	}
	t := fmt.Sprintf("%s webhooks · %s of %s · kept %s", num(j.Entries), BytesText(j.Bytes), BytesText(j.MaxBytes), retainText(j.Retain))
	if j.Binds == "max_bytes" {
		t += fmt.Sprintf(" · max_bytes binds: about %s kept at %.2f webhooks/s of %s each", j.Holds.Round(time.Minute), j.Rate, BytesText(j.BytesPerEntry))
	}
	return t
}

func retainText(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	return d.String()
}

// window reads since= and until= (RFC 3339, or a duration ago) from q.
func window(q url.Values, since, until *time.Time) error {
	now := time.Now()
	for _, t := range []struct {
		name string
		dst  *time.Time
	}{{"since", since}, {"until", until}} {
		if s := q.Get(t.name); s != "" {
			v, err := parseWhen(s, now)
			if err != nil {
				return fmt.Errorf("bad %s %q (an RFC 3339 time or a duration ago, like 1h)", t.name, s)
			}
			*t.dst = v
		}
	}
	return nil
}
