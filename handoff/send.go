package handoff

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// attemptTimeout bounds one hand-off request; commitTimeout one that ends
// a key's batch, which the other hookpace answers once it has stored the
// whole key, one webhook after another (the budget bounds it too).
const (
	attemptTimeout = 10 * time.Second
	commitTimeout  = 2 * time.Minute
)

// noRetryAfter is the wait after a 429 without a usable Retry-After.
const noRetryAfter = time.Second

// Connection errors are retried after a backoff that doubles from
// retryFirst to retryMax, while the context's deadline less retryMargin
// (the time the shutdown needs after the hand-off: closing the listeners
// and the spool) leaves room for the wait. A context without a deadline
// gives no room: the error keeps the webhook at once.
const (
	retryFirst  = 50 * time.Millisecond
	retryMax    = time.Second
	retryMargin = 2 * time.Second
)

// handOff sends m alone (no ordering key, or a target that stores a
// key's webhooks one by one) to the target, with its host's state if st
// is not empty, until it is answered 202 (then deletes it here and
// returns the id it got there) or kept (then returns why).
func (s *sender) handOff(ctx context.Context, m *spool.Message, st HostState) (newID, kept string) {
	resp, kept := s.exchange(ctx, m, st, nil)
	if kept != "" {
		return "", kept
	}
	return s.stored(m, resp)
}

// stored settles m, answered resp: a hookpace's 202 (it names the id it
// stored m under) deletes it here.
func (s *sender) stored(m *spool.Message, resp answer) (newID, kept string) {
	if resp.status != http.StatusAccepted {
		return "", "status_" + strconv.Itoa(resp.status)
	}
	if _, err := spool.ParseRef(resp.id); err != nil || resp.id == "" {
		// Not a hookpace's acknowledgement (one always names the id it
		// stored the webhook under): whatever answered need not have
		// kept it.
		return "", "202_without_id"
	}
	// Durable there: only now may it go here. A crash before the delete
	// is durable sends it again after the restart.
	if err := s.delete(m, resp.id); err != nil {
		s.log.Error("handoff: accepted there but not deleted here; it will be delivered twice",
			"id", m.Ref().String(), "new_id", resp.id, "error", err)
		return "", "local_delete_failed"
	}
	return resp.id, ""
}

// exchange sends m (as chunk b of its key's batch, if b is not nil) until
// it gets an answer to act on, or returns why not. A connection error
// (the other hookpace restarting, a blip of the network) is retried with
// backoff within the budget less its margin, a 429 after its Retry-After
// within the budget, and a 503 with a Retry-After (a hookpace stopping,
// or full) after it within the budget less the margin; but not an answer
// that says part of a batch was stored (StoredHeader), which the caller
// acts on.
func (s *sender) exchange(ctx context.Context, m *spool.Message, st HostState, b *Batch) (answer, string) {
	backoff := retryFirst
	for {
		if ctx.Err() != nil {
			return answer{}, "timeout"
		}
		resp, err := s.send(ctx, m, st, b)
		if err != nil {
			if ctx.Err() != nil {
				return answer{}, "timeout"
			}
			dl, ok := ctx.Deadline()
			if !ok || s.now().Add(backoff).After(dl.Add(-retryMargin)) {
				return answer{}, "connection_error"
			}
			s.retries.Add(1)
			if !s.sleep(ctx, backoff) {
				return answer{}, "timeout"
			}
			backoff = min(2*backoff, retryMax)
			continue
		}
		backoff = retryFirst
		switch {
		case resp.status == http.StatusTooManyRequests && resp.stored <= 0:
			wait := retryAfter(resp.retryAfter, time.Now())
			if dl, ok := ctx.Deadline(); ok && time.Now().Add(wait).After(dl) {
				return answer{}, "429_past_budget"
			}
			s.sleep(ctx, wait)
		case resp.status == http.StatusServiceUnavailable && resp.retryAfter != "" && resp.stored <= 0:
			wait := retryAfter(resp.retryAfter, time.Now())
			if dl, ok := ctx.Deadline(); !ok || s.now().Add(wait).After(dl.Add(-retryMargin)) {
				return resp, ""
			}
			s.retries.Add(1)
			if !s.sleep(ctx, wait) {
				return answer{}, "timeout"
			}
		default:
			return resp, ""
		}
	}
}

// sleepCtx waits d, or until ctx is done: it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// delete removes m, handed off under id there, as the journal says.
func (s *sender) delete(m *spool.Message, id string) error {
	return s.queue.HandedOff(m, "hookpace at "+s.target.Host+" as "+id)
}

type answer struct {
	status     int
	id         string // X-Hookpace-Id of a 202
	retryAfter string
	// staged and stored are StagedHeader and StoredHeader; -1 without.
	staged, stored int
}

// send makes one proxy-form request for m, as chunk b of its key's batch
// if b is not nil: the request line carries m's absolute URL, the
// connection goes to the target.
func (s *sender) send(ctx context.Context, m *spool.Message, st HostState, b *Batch) (answer, error) {
	timeout := attemptTimeout
	if b != nil && b.Last {
		timeout = commitTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	dest, err := url.Parse(m.URL)
	if err != nil {
		return answer{status: http.StatusBadRequest}, nil // kept: what would the target make of it?
	}
	// An Opaque that does not start with "//" is written as the request
	// target as it is: "POST http://partner.example/hooks?a=1 HTTP/1.1",
	// whatever the URL's scheme, over a connection to the target.
	u := &url.URL{Scheme: s.target.Scheme, Host: s.target.Host, Opaque: m.URL}
	req, err := http.NewRequestWithContext(ctx, m.Method, s.target.String(), bytes.NewReader(m.Body))
	if err != nil {
		return answer{}, fmt.Errorf("build request: %w", err)
	}
	req.URL = u
	req.Host = dest.Host
	req.Header = m.Header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = nil // none rather than Go's default, as a delivery would
	}
	setLane(req.Header, m, time.Now())
	req.Header.Del(HostHeader) // only this hookpace's, below
	req.Header.Del(HostSignatureHeader)
	claim := s.from + "/" + m.Ref().String()
	req.Header.Set(Header, claim)
	if s.secret != nil {
		req.Header.Set(SignatureHeader, Sign(s.secret, claim, m.Method, m.Host, m.Body))
		if !st.Empty() {
			v := st.Encode()
			req.Header.Set(HostHeader, v)
			req.Header.Set(HostSignatureHeader, SignHost(s.secret, claim, m.Host, v))
		}
	}
	req.Header.Del(BatchHeader)
	req.Header.Del(BatchSignatureHeader)
	if b != nil {
		v := b.Encode()
		req.Header.Set(BatchHeader, v)
		if s.secret != nil {
			req.Header.Set(BatchSignatureHeader, SignBatch(s.secret, claim, v))
		}
	}
	if s.auth != "" {
		req.Header.Set("Proxy-Authorization", s.auth)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return answer{status: resp.StatusCode, id: resp.Header.Get("X-Hookpace-Id"), retryAfter: resp.Header.Get("Retry-After"),
		staged: count(resp.Header.Get(StagedHeader)), stored: count(resp.Header.Get(StoredHeader))}, nil
}

// count reads a count header: -1 when it is absent or not a count.
func count(v string) int {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// The lane headers as the receiving hookpace's proxy reads
// them (proxy.HeaderFairnessKey and the others; proxy imports this
// package, so they are spelled out here, and a test checks they agree).
const (
	headerFairnessKey = "Hookpace-Fairness-Key"
	headerOrderingKey = "Hookpace-Ordering-Key"
	headerPriority    = "Hookpace-Priority"
	headerNotBefore   = "Hookpace-Not-Before"
)

// setLane re-attaches m's lane fields as the headers that ingest reads
// them from (and strips before storing): the other hookpace queues m in
// the same lane, keeps its ordering key, and holds it until its
// not-before time, if that is still ahead of now. A fairness key goes as
// the header even where the hosts take their keys from the proxy user or
// the path: the other hookpace keeps it from the header for a signed
// hand-off (proxy's handoffKey).
func setLane(h http.Header, m *spool.Message, now time.Time) {
	if m.Fairness != "" {
		h.Set(headerFairnessKey, m.Fairness)
	}
	if m.Ordering != "" {
		h.Set(headerOrderingKey, m.Ordering)
	}
	if m.Priority != spool.PriorityNormal {
		h.Set(headerPriority, m.Priority.String())
	}
	if m.NotBefore.After(now) {
		// An HTTP-date has whole seconds: rounded up, never early.
		at := m.NotBefore.Truncate(time.Second)
		if at.Before(m.NotBefore) {
			at = at.Add(time.Second)
		}
		h.Set(headerNotBefore, at.UTC().Format(http.TimeFormat))
	}
}

// retryAfter reads a Retry-After in seconds or as an HTTP-date.
func retryAfter(v string, now time.Time) time.Duration {
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return noRetryAfter
}

func basicAuth(userPass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(userPass))
}
