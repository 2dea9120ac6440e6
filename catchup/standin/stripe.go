package standin

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Stripe is one Stripe account's events and one webhook endpoint: the
// List all events endpoint (GET /v1/events) and signed webhooks
// (Stripe-Signature: t=...,v1=HMAC-SHA256 of "t.body").
type Stripe struct {
	Key    string // the secret key a request must carry (Bearer, or Basic's user)
	Secret string // the endpoint's signing secret (whsec_...)
	Target string // the endpoint's URL
	Client *http.Client
	Now    func() time.Time

	mu      sync.Mutex
	events  []*stripeEvent // oldest first
	seq     int
	Listed  int      // list requests answered 200
	queries []string // each list request's query
}

// SetTarget changes the endpoint's URL.
func (s *Stripe) SetTarget(u string) {
	s.mu.Lock()
	s.Target = u
	s.mu.Unlock()
}

// Queries are the list requests' queries, in order.
func (s *Stripe) Queries() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.queries)
}

type stripeEvent struct {
	id      string
	created int64
	typ     string
	object  json.RawMessage
	pending int // endpoints not yet answered 2xx
}

// json is the event as the API renders it now: pending_webhooks is the
// count at this moment, so a fetched event differs from what was posted.
func (e *stripeEvent) json() json.RawMessage {
	b, _ := json.MarshalIndent(map[string]any{
		"id": e.id, "object": "event", "api_version": "2025-03-31.basil", "created": e.created,
		"data": map[string]any{"object": e.object}, "livemode": false, "pending_webhooks": e.pending,
		"request": map[string]any{"id": nil, "idempotency_key": nil}, "type": e.typ,
	}, "", "  ")
	return b
}

// Emit creates an event of type typ around object and, unless lost,
// posts it signed to the endpoint once; it returns the event's id.
func (s *Stripe) Emit(typ string, object any, lost bool) string {
	obj, _ := json.Marshal(object)
	s.mu.Lock()
	s.seq++
	e := &stripeEvent{id: fmt.Sprintf("evt_1Standin%014d", s.seq), created: s.now().Unix(), typ: typ, object: obj, pending: 1}
	s.events = append(s.events, e)
	body := e.json()
	s.mu.Unlock()
	if !lost && s.post(body) {
		s.mu.Lock()
		e.pending = 0
		s.mu.Unlock()
	}
	return e.id
}

// Newest is the id of the newest event; "" before the first.
func (s *Stripe) Newest() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.events) == 0 {
		return ""
	}
	return s.events[len(s.events)-1].id
}

func (s *Stripe) post(body []byte) bool {
	t := strconv.FormatInt(s.now().Unix(), 10)
	mac := hmac.New(sha256.New, []byte(s.Secret))
	mac.Write([]byte(t + "."))
	mac.Write(body)
	s.mu.Lock()
	target := s.Target
	s.mu.Unlock()
	req, err := http.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)")
	req.Header.Set("Stripe-Signature", "t="+t+",v1="+hex.EncodeToString(mac.Sum(nil)))
	client := s.Client
	if client == nil {
		client = &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 30 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 300
}

// Handler serves GET /v1/events.
func (s *Stripe) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/events", s.list)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			key, _, ok = r.BasicAuth()
		}
		if !ok || s.Key == "" || !hmac.Equal([]byte(key), []byte(s.Key)) {
			stripeError(w, http.StatusUnauthorized, "", "", "Invalid API Key provided")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// list answers List all events: newest first; limit 1 to 100 (default
// 10); ending_before or starting_after, not both, each an event that
// exists; created as a number or with gt, gte, lt, lte; type (a "*"
// at its end matches a prefix) or types[] (at most 20); events of the
// last 30 days only.
func (s *Stripe) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 10
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			stripeError(w, http.StatusBadRequest, "parameter_invalid_integer", "limit", "Invalid integer: "+v)
			return
		}
		limit = n
	}
	before, after := q.Get("ending_before"), q.Get("starting_after")
	if before != "" && after != "" {
		stripeError(w, http.StatusBadRequest, "parameter_unknown", "ending_before", "You may only specify one of ending_before and starting_after.")
		return
	}
	match, msg := createdFilter(q)
	if msg != "" {
		stripeError(w, http.StatusBadRequest, "parameter_invalid_integer", "created", msg)
		return
	}
	types := q["types[]"]
	if t := q.Get("type"); t != "" {
		types = append(types, t)
	}
	if len(types) > 20 {
		stripeError(w, http.StatusBadRequest, "parameter_invalid_array", "types", "At most 20 types")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.now().Add(-30 * 24 * time.Hour).Unix()
	var all []*stripeEvent // newest first
	for i := len(s.events) - 1; i >= 0; i-- {
		e := s.events[i]
		if e.created >= kept && match(e.created) && typeMatch(types, e.typ) {
			all = append(all, e)
		}
	}
	cursor, param := after, "starting_after"
	if before != "" {
		cursor, param = before, "ending_before"
	}
	if cursor != "" && !slices.ContainsFunc(s.events, func(e *stripeEvent) bool { return e.id == cursor && e.created >= kept }) {
		stripeError(w, http.StatusBadRequest, "resource_missing", param, "No such event: '"+cursor+"'")
		return
	}
	at := slices.IndexFunc(all, func(e *stripeEvent) bool { return e.id == cursor })
	var page []*stripeEvent
	more := false
	switch {
	case after != "": // older than the cursor
		rest := all
		if at >= 0 {
			rest = all[at+1:]
		} else {
			rest = olderThan(all, s.events, cursor)
		}
		page, more = rest[:min(limit, len(rest))], len(rest) > limit
	case before != "": // newer than the cursor: the limit closest to it
		var rest []*stripeEvent
		if at >= 0 {
			rest = all[:at]
		} else {
			rest = newerThan(all, s.events, cursor)
		}
		page, more = rest[max(0, len(rest)-limit):], len(rest) > limit
	default:
		page, more = all[:min(limit, len(all))], len(all) > limit
	}
	data := make([]json.RawMessage, len(page))
	for i, e := range page {
		data[i] = e.json()
	}
	s.Listed++
	s.queries = append(s.queries, r.URL.RawQuery)
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "url": "/v1/events", "has_more": more, "data": data})
}

// olderThan and newerThan are the events of all (newest first, filtered)
// older or newer than cursor, an event the filter left out.
func olderThan(all, events []*stripeEvent, cursor string) []*stripeEvent {
	i := slices.IndexFunc(events, func(e *stripeEvent) bool { return e.id == cursor })
	return slices.DeleteFunc(slices.Clone(all), func(e *stripeEvent) bool {
		return slices.IndexFunc(events, func(x *stripeEvent) bool { return x == e }) > i
	})
}

func newerThan(all, events []*stripeEvent, cursor string) []*stripeEvent {
	i := slices.IndexFunc(events, func(e *stripeEvent) bool { return e.id == cursor })
	return slices.DeleteFunc(slices.Clone(all), func(e *stripeEvent) bool {
		return slices.IndexFunc(events, func(x *stripeEvent) bool { return x == e }) < i
	})
}

func createdFilter(q url.Values) (func(int64) bool, string) {
	type bound struct {
		key string
		ok  func(c, v int64) bool
	}
	var checks []func(int64) bool
	for _, b := range []bound{
		{"created", func(c, v int64) bool { return c == v }},
		{"created[gt]", func(c, v int64) bool { return c > v }},
		{"created[gte]", func(c, v int64) bool { return c >= v }},
		{"created[lt]", func(c, v int64) bool { return c < v }},
		{"created[lte]", func(c, v int64) bool { return c <= v }},
	} {
		s := q.Get(b.key)
		if s == "" {
			continue
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, "Invalid integer: " + s
		}
		checks = append(checks, func(c int64) bool { return b.ok(c, v) })
	}
	return func(c int64) bool {
		for _, ok := range checks {
			if !ok(c) {
				return false
			}
		}
		return true
	}, ""
}

func typeMatch(types []string, typ string) bool {
	if len(types) == 0 {
		return true
	}
	for _, t := range types {
		if p, ok := strings.CutSuffix(t, "*"); ok && strings.HasPrefix(typ, p) || t == typ {
			return true
		}
	}
	return false
}

func stripeError(w http.ResponseWriter, status int, code, param, msg string) {
	e := map[string]any{"type": "invalid_request_error", "message": msg}
	if code != "" {
		e["code"] = code
	}
	if param != "" {
		e["param"] = param
	}
	writeJSON(w, status, map[string]any{"error": e})
}

func (s *Stripe) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}
