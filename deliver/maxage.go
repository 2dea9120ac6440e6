package deliver

// The dispatcher's side of the journal: it records each attempt with the
// partner's answer, sends a webhook that waited past max_age at the head
// of its queue (the window judges it: window.Host.ExpireHead) to the dead
// letters, and pauses a host that failed for
// auto_pause_after. Backlog control (purge, bury) is backlog.go.

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/hookpace/hookpace/credential"
	"github.com/hookpace/hookpace/rewrite"
	"github.com/hookpace/hookpace/spool"
)

// excerptMax is how much of each answer's body an attempt reads for the
// journal (0: none).
func (d *Dispatcher) excerptMax() int {
	return d.opts.Journal.JournalResponseBody()
}

// journalAttempt records one attempt of m, sent alone or as one of batch
// webhooks in one request.
func (d *Dispatcher) journalAttempt(m *spool.Message, res result, at time.Time, batch int) {
	a := spool.Attempt{At: at.Add(-res.took), Duration: res.took, Status: res.status, Header: res.header, Body: res.excerpt, Batch: batch}
	if res.verdict != vDone {
		a.Error = res.reason
	}
	d.opts.Journal.RecordAttempt(m, a)
	if res.verdict == vDone {
		d.opts.Journal.JournalBody(m) // journal.bodies: kept to be sent again, before the delete's outcome
	}
}

// answerHeader is what of an answer's header the journal may keep: the
// spool redacts secrets, this leaves out what says nothing.
func answerHeader(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, vs := range h {
		switch k {
		case "Date", "Content-Length", "Connection", "Keep-Alive":
			continue
		}
		out[k] = vs
	}
	return out
}

// expireHeads sends every webhook at the head of h's window that waited
// past max_age (window.Host.ExpireHead judges it) to the dead letters.
func (d *Dispatcher) expireHeads(h *host, now time.Time) {
	for m := h.win.ExpireHead(now); m != nil; m = h.win.ExpireHead(now) {
		d.expire(h, m, now)
	}
}

// expire buries m, which waited past max_age at the head of h's queue.
func (d *Dispatcher) expire(h *host, m *spool.Message, now time.Time) {
	d.release(h, m)
	reason := fmt.Sprintf("max_age %v exceeded at the head of the queue (queued %v ago, %d attempts)",
		h.pol.MaxAge, now.Sub(m.Enqueued).Round(time.Millisecond), m.Attempts)
	d.opts.Store.Bury(m, reason, now)
	d.emitDead(m, reason, now)
	h.win.OrderedDead(m, reason)
	d.log.Info("delivery", "host", h.name, "id", m.Ref().String(), "attempt", m.Attempts, "outcome", "dead",
		"age_ms", now.Sub(m.Enqueued).Milliseconds(), "reason", reason)
}

// readAnswer reads the start of an answer's body: what a 400 says of a
// batch's size (batchsplit.go), and the journal's excerpt with the header.
// The excerpt is read scrubSlack bytes longer than the journal keeps, so
// that a credential cut by the journal's limit is still whole, and
// scrubbed, when the journal cuts it (scrub, spool.RecordAttempt).
func (r *result) readAnswer(resp *http.Response, excerpt int) {
	n := excerpt
	if excerpt > 0 {
		n += scrubSlack
	}
	if r.status == http.StatusBadRequest {
		n = max(n, answerMax)
	}
	if n == 0 {
		return
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, int64(n)))
	if r.status == http.StatusBadRequest {
		r.answer = b[:min(len(b), answerMax)]
	}
	if excerpt > 0 {
		r.excerpt, r.header = b, answerHeader(resp.Header)
	}
}

// scrubSlack is how much more of an answer than journal.response_body an
// attempt reads: longer than any credential's encoded forms.
const scrubSlack = 4 << 10

// scrub replaces in what the attempt learned (the answer's header and
// excerpt, the reason) every credential value the host's credentials sent
// (credential.Credentials.Scrub): a partner that echoes its request puts
// them in its answer, and from there they would reach the journal, the
// log, the span and the host's last error.
func (r *result) scrub(auth *credential.Credentials) {
	if auth == nil {
		return
	}
	r.reason = auth.Scrub(r.reason)
	r.header = auth.ScrubHeader(r.header)
	if len(r.excerpt) > 0 {
		r.excerpt = []byte(auth.Scrub(string(r.excerpt)))
	}
}

// scrubEcho replaces in what the attempt learned (the answer's header
// and excerpt, the reason) the value of every header the journal hides
// that the request carried: the app's own (ms's headers) and what the
// host's rewrite.headers.set adds. A partner that echoes its request
// would otherwise put them, in clear, in the journal's stored answer.
func (r *result) scrubEcho(ms []*spool.Message, rw *rewrite.Headers) {
	if len(r.excerpt) == 0 && len(r.header) == 0 && r.reason == "" {
		return
	}
	h := http.Header{}
	for _, m := range ms {
		for k, vs := range m.Header {
			h[k] = append(h[k], vs...)
		}
	}
	if rw != nil {
		for _, s := range rw.Set {
			h[s.Name] = append(h[s.Name], s.Value)
		}
	}
	forms := spool.EchoForms(h)
	if len(forms) == 0 {
		return
	}
	r.reason = spool.ScrubEcho(r.reason, forms)
	r.header = spool.ScrubEchoHeader(r.header, forms)
	if len(r.excerpt) > 0 {
		r.excerpt = []byte(spool.ScrubEcho(string(r.excerpt), forms))
	}
}

// autoPause pauses host once it has failed without a single success for
// pol.AutoPauseAfter (auto_pause_after): its queue is kept, unlike the
// endpoints that other webhook servers disable. A 429 is no failure: the
// partner answers. It runs off the dispatcher's lock, after an attempt.
func (d *Dispatcher) autoPause(host string, pol *Policy, res result, now time.Time) {
	var un unsendable
	if pol.AutoPauseAfter <= 0 || res.verdict == vHold || res.verdict == vSplit || errors.As(res.err, &un) {
		return // a webhook that can't be built says nothing of its host
	}
	d.mu.Lock()
	since, failing := d.purges.failing[host]
	switch {
	case res.verdict == vDone:
		delete(d.purges.failing, host)
	case !failing:
		if d.purges.failing == nil {
			d.purges.failing = map[string]time.Time{}
		}
		d.purges.failing[host] = now
	case now.Sub(since) >= pol.AutoPauseAfter:
		delete(d.purges.failing, host)
	default:
		failing = false
	}
	d.mu.Unlock()
	if !failing || res.verdict == vDone {
		return
	}
	why := fmt.Sprintf("auto_pause_after %v: failing without a single success since %s (last: %s)",
		pol.AutoPauseAfter, since.UTC().Format(time.RFC3339), res.reason)
	if err := d.pauseAuto(host, why); err != nil {
		d.log.Error("auto_pause_after: could not pause the host", "host", host, "error", err)
		return
	}
	d.emit(EventHostPaused, host, now, map[string]any{"reason": why, "failing_since": since.UTC(),
		"auto_pause_after": pol.AutoPauseAfter.String(), "last_error": res.reason})
	d.log.Warn("host paused by auto_pause_after: it has failed without a single success since failing_since; its queue is kept (hookpace resume HOST)",
		"host", host, "failing_since", since.UTC().Format(time.RFC3339Nano), "auto_pause_after", pol.AutoPauseAfter.String(), "last_error", res.reason)
}
