package proxy

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// Lanes: the headers that say where a webhook waits within its
// host. They are hookpace's, never the partner's: storedHeader drops them
// (hopHeaders) whatever the config says, and ingest reads them from the
// request into the message before its body is read.
const (
	HeaderFairnessKey = "Hookpace-Fairness-Key" // read with fairness.key: header
	HeaderOrderingKey = "Hookpace-Ordering-Key"
	HeaderPriority    = "Hookpace-Priority"    // high | normal | low
	HeaderDelay       = "Hookpace-Delay"       // a Go duration or seconds
	HeaderNotBefore   = "Hookpace-Not-Before"  // an HTTP-date
	outcomeKeyFull    = OutcomeRejectedKeyFull // 429: the fairness key's queue is at max_queued_per_key
)

// lane is what the lane headers and the host's fairness key say of one
// webhook.
type lane struct {
	fairness, ordering string
	priority           spool.Priority
	notBefore          time.Time
}

// set writes l into m; call it before m.ReadBody.
func (l *lane) set(m *spool.Message) {
	m.Fairness, m.Ordering, m.Priority, m.NotBefore = l.fairness, l.ordering, l.priority, l.notBefore
}

// readLane reads r's lane headers and its fairness key for a host with
// policy hp, as of now; a header it cannot honour is a 400 that says why.
// Without any lane header and without fairness it allocates nothing.
func readLane(r *http.Request, hp *HostPolicy, user string, now time.Time) (lane, *decision) {
	var l lane
	h := r.Header
	key, bad := fairnessKey(r, hp, user)
	if bad != nil {
		return l, bad
	}
	l.fairness = key
	if vs := h[HeaderOrderingKey]; len(vs) > 0 {
		if len(vs) > 1 {
			return l, badLane(HeaderOrderingKey + " given more than once")
		}
		if err := spool.CheckLaneKey(vs[0], spool.MaxLaneKey); err != nil {
			return l, badLane(HeaderOrderingKey + " " + err.Error() + ": want 1 to " + strconv.Itoa(spool.MaxLaneKey) + " bytes of printable UTF-8")
		}
		l.ordering = vs[0]
	}
	if vs := h[HeaderPriority]; len(vs) > 0 {
		p, ok := spool.ParsePriority(vs[0])
		if len(vs) > 1 || vs[0] == "" || !ok {
			return l, badLane(HeaderPriority + " must be given once, as high, normal or low")
		}
		l.priority = p
	}
	if len(h[HeaderDelay]) > 0 || len(h[HeaderNotBefore]) > 0 {
		nb, bad := notBefore(h, hp.MaxAge, now)
		if bad != nil {
			return l, bad
		}
		l.notBefore = nb
	}
	return l, nil
}

// fairnessKey is the webhook's fairness key as the host's fairness.key
// says: its Hookpace-Fairness-Key (header), the proxy user it
// authenticated as (proxy_user), or its path's first segments (path); ""
// without fairness. (A verified hand-off keeps its first hookpace's key:
// handoffKey.)
func fairnessKey(r *http.Request, hp *HostPolicy, user string) (string, *decision) {
	var key, what string
	switch hp.FairnessKey {
	case FairnessHeader:
		vs := r.Header[HeaderFairnessKey]
		if len(vs) == 0 {
			return "", nil
		}
		if len(vs) > 1 {
			return "", badLane(HeaderFairnessKey + " given more than once")
		}
		key, what = vs[0], HeaderFairnessKey
	case FairnessProxyUser:
		key, what = user, "the proxy user (fairness key)"
		if key == "" {
			return "", nil
		}
	case FairnessPath:
		key, what = pathKey(r.URL.EscapedPath(), hp.PathDepth), "the path's first "+strconv.Itoa(hp.PathDepth)+" segments (fairness key)"
	default:
		return "", nil
	}
	if err := spool.CheckLaneKey(key, spool.MaxLaneKey); err != nil {
		return "", badLane(what + " " + err.Error() + ": want 1 to " + strconv.Itoa(spool.MaxLaneKey) + " bytes of printable UTF-8")
	}
	return key, nil
}

// handoffKey gives a hand-off whose claim checked the fairness key its
// first hookpace found, which it carries in Hookpace-Fairness-Key, when the
// host has fairness keys but takes them from elsewhere (a hand-off comes
// as the sender's proxy user, to its path). Only a signed claim: any
// client could send the header.
func handoffKey(r *http.Request, mode FairnessFrom, m *spool.Message) {
	if mode == FairnessNone || mode == FairnessHeader {
		return
	}
	if vs := r.Header[HeaderFairnessKey]; len(vs) == 1 && spool.CheckLaneKey(vs[0], spool.MaxLaneKey) == nil {
		m.Fairness = vs[0]
	}
}

// pathKey is p up to its depth-th segment: "/webhooks/cust-42/x" at depth
// 2 is "/webhooks/cust-42".
func pathKey(p string, depth int) string {
	if p == "" {
		return "/"
	}
	n := 0
	for i := 1; i < len(p); i++ {
		if p[i] == '/' {
			if n++; n == depth {
				return p[:i]
			}
		}
	}
	return p
}

// notBefore reads Hookpace-Delay or Hookpace-Not-Before: the time before
// which the webhook is not sent, zero for a time already past. Both, a
// negative or unreadable value, or a time past the host's max_age are 400.
func notBefore(h http.Header, maxAge time.Duration, now time.Time) (time.Time, *decision) {
	delay, date := h[HeaderDelay], h[HeaderNotBefore]
	var at time.Time
	switch {
	case len(delay)+len(date) > 1:
		return at, badLane("give one of " + HeaderDelay + " and " + HeaderNotBefore + ", once")
	case len(delay) == 1:
		d, ok := parseDelay(delay[0])
		if !ok {
			return at, badLane(HeaderDelay + " must be a duration (30s, 5m) or seconds, not negative")
		}
		at = now.Add(d)
	default:
		t, err := http.ParseTime(date[0])
		if err != nil {
			return at, badLane(HeaderNotBefore + " must be an HTTP-date (Wed, 25 Nov 2026 16:00:00 GMT)")
		}
		at = t
	}
	if maxAge > 0 && at.After(now.Add(maxAge)) {
		what := HeaderDelay
		if len(date) > 0 {
			what = HeaderNotBefore
		}
		return time.Time{}, badLane(what + " beyond max_age (" + maxAge.String() + "): it would be dead-lettered before it is due")
	}
	if !at.After(now) {
		return time.Time{}, nil // due already: at once
	}
	return at, nil
}

// parseDelay reads a Go duration ("30s", "1m30s") or plain seconds ("30",
// "1.5"); negative is not a delay.
func parseDelay(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	if c := s[len(s)-1]; c >= '0' && c <= '9' || c == '.' {
		secs, err := strconv.ParseFloat(s, 64)
		// float64(math.MaxInt64) is 2^63: a product at or past it does
		// not fit a Duration.
		if err != nil || secs < 0 || math.IsNaN(secs) || secs*float64(time.Second) >= float64(math.MaxInt64) {
			return 0, false
		}
		return time.Duration(secs * float64(time.Second)), true
	}
	d, err := time.ParseDuration(s)
	return d, err == nil && d >= 0
}

// admitLane reads r's lane and refuses it when its fairness key is at
// max_queued_per_key.
func (p *Proxy) admitLane(r *http.Request, hp *HostPolicy, host, user string, now time.Time) (lane, *decision) {
	l, bad := readLane(r, hp, user, now)
	if bad != nil {
		return l, bad
	}
	return l, p.keyFull(host, l.fairness, hp)
}

func badLane(reason string) *decision {
	d := badRequest(reason)
	return &d
}

// keyFull answers a webhook whose fairness key has max_queued_per_key
// webhooks queued at host: 429, with a Retry-After from the key's share of
// the host's rate; nil when the key has room.
func (p *Proxy) keyFull(host, key string, hp *HostPolicy) *decision {
	if hp.MaxQueuedPerKey <= 0 || key == "" {
		return nil
	}
	queued, keys := p.opts.Spool.KeyQueued(host, key)
	if int64(queued) < hp.MaxQueuedPerKey {
		return nil
	}
	ra := unknownRetryAfter
	if hp.Rate > 0 {
		// The key drains at its share of the host's rate: rate / keys.
		secs := math.Ceil(float64(queued) / (hp.Rate / float64(max(keys, 1))))
		ra = boundRetryAfter(time.Duration(min(secs, maxRetryAfter.Seconds()) * float64(time.Second)))
	}
	return &decision{outcome: outcomeKeyFull, status: http.StatusTooManyRequests,
		reason: "queue full for fairness key " + strconv.Quote(key) + " at " + host + " (max_queued_per_key " +
			strconv.FormatInt(hp.MaxQueuedPerKey, 10) + "); retry later",
		header: http.Header{"Retry-After": {strconv.Itoa(int(ra / time.Second))}}}
}
