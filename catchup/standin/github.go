// Package standin holds local stand-ins for the webhook providers'
// APIs that catch-up calls, for tests: each keeps real state (the
// deliveries or events it made), implements the documented endpoints
// with their paging and errors, and posts its webhooks, signed as the
// provider signs them, to a target URL. Nothing in it answers from a
// script.
package standin

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// GitHubDelivery is one entry of a hook's deliveries, as GitHub's REST
// API (2022-11-28) shows it.
type GitHubDelivery struct {
	ID          int64     `json:"id"`
	GUID        string    `json:"guid"`
	DeliveredAt time.Time `json:"delivered_at"`
	Redelivery  bool      `json:"redelivery"`
	Duration    float64   `json:"duration"`
	Status      string    `json:"status"`
	StatusCode  int       `json:"status_code"`
	Event       string    `json:"event"`
	Action      *string   `json:"action"`
	payload     []byte
}

// Reach says what becomes of one delivery's attempt.
type Reach int

const (
	// Reached: posted to the target; GitHub records its answer.
	Reached Reach = iota
	// Lost: never reaches the target (GitHub records a failed connection).
	Lost
	// Late: posted and answered, but GitHub records a timeout (the
	// target answered after GitHub stopped waiting).
	Late
)

// GitHub is one webhook of a repository, an organisation or an App, with
// its recent deliveries, and the REST endpoints that list them and ask
// for a redelivery.
type GitHub struct {
	Secret []byte // the webhook's secret: X-Hub-Signature-256
	Target string // where the webhook posts
	// The hook: Repo ("owner/name") or Org with HookID and Token (what a
	// Bearer token must be), or AppID and AppKey (an App's hook, whose
	// JWT must verify with AppKey).
	Repo   string
	Org    string
	HookID int64
	Token  string
	AppID  int64
	AppKey *rsa.PublicKey
	// MaxPerPage caps per_page below GitHub's 100, so that short lists page.
	MaxPerPage int
	Client     *http.Client
	Now        func() time.Time

	mu          sync.Mutex
	deliveries  []*GitHubDelivery // oldest first
	nextID      int64
	down        bool // the target is unreachable: every attempt is Lost
	Redelivered []int64
	Listed      int // list requests answered 200
}

// Handler serves the hook's REST endpoints.
func (g *GitHub) Handler() http.Handler {
	mux := http.NewServeMux()
	var base string
	switch {
	case g.Repo != "":
		base = fmt.Sprintf("/repos/%s/hooks/%d/deliveries", g.Repo, g.HookID)
	case g.Org != "":
		base = fmt.Sprintf("/orgs/%s/hooks/%d/deliveries", g.Org, g.HookID)
	default:
		base = "/app/hook/deliveries"
	}
	mux.HandleFunc("GET "+base, g.list)
	mux.HandleFunc("POST "+base+"/{delivery_id}/attempts", g.redeliver)
	return g.checked(mux)
}

// SetTarget changes where the webhook posts.
func (g *GitHub) SetTarget(u string) {
	g.mu.Lock()
	g.Target = u
	g.mu.Unlock()
}

// Redeliveries are the delivery ids whose redelivery was asked, in order.
func (g *GitHub) Redeliveries() []int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.Redelivered)
}

// Lists is how many list requests were answered 200.
func (g *GitHub) Lists() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.Listed
}

// SetDown makes the target unreachable (true) or reachable again.
func (g *GitHub) SetDown(down bool) {
	g.mu.Lock()
	g.down = down
	g.mu.Unlock()
}

// Send makes a delivery of a new event (a new guid) and attempts it as
// reach says; it returns the guid.
func (g *GitHub) Send(event, action string, payload []byte, reach Reach) string {
	var b [16]byte
	rand.Read(b[:])
	guid := fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
	var act *string
	if action != "" {
		act = &action
	}
	g.attempt(&GitHubDelivery{GUID: guid, Event: event, Action: act, payload: payload}, reach)
	return guid
}

// Deliveries is a copy of the deliveries, oldest first.
func (g *GitHub) Deliveries() []GitHubDelivery {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]GitHubDelivery, len(g.deliveries))
	for i, d := range g.deliveries {
		out[i] = *d
	}
	return out
}

// attempt posts d (unless lost or down) and records it as a new delivery.
func (g *GitHub) attempt(d *GitHubDelivery, reach Reach) {
	g.mu.Lock()
	g.nextID++
	d.ID = g.nextID
	down := g.down
	g.mu.Unlock()
	start := g.now()
	d.DeliveredAt = start.UTC().Truncate(time.Second)
	switch {
	case reach == Lost || down:
		d.Status, d.StatusCode = "failed to connect to host", 0
	default:
		code, err := g.post(d)
		d.Status, d.StatusCode = "OK", code
		if err != nil {
			d.Status, d.StatusCode = err.Error(), 0
		} else if code < 200 || code > 299 {
			d.Status = "Invalid HTTP Response: " + strconv.Itoa(code)
		}
		if reach == Late {
			d.Status, d.StatusCode = "timed out", 0
		}
	}
	d.Duration = g.now().Sub(start).Seconds()
	g.mu.Lock()
	g.deliveries = append(g.deliveries, d)
	g.mu.Unlock()
}

// post sends d's payload as GitHub does: signed with the hook's secret.
func (g *GitHub) post(d *GitHubDelivery) (int, error) {
	g.mu.Lock()
	target := g.Target
	g.mu.Unlock()
	req, err := http.NewRequest(http.MethodPost, target, bytes.NewReader(d.payload))
	if err != nil {
		return 0, err
	}
	mac := hmac.New(sha256.New, g.Secret)
	mac.Write(d.payload)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/standin")
	req.Header.Set("X-GitHub-Delivery", d.GUID)
	req.Header.Set("X-GitHub-Event", d.Event)
	req.Header.Set("X-GitHub-Hook-ID", strconv.FormatInt(g.HookID, 10))
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := g.client().Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// list answers GET .../deliveries: newest first, per_page (default 30,
// at most 100) a page, the next page by cursor in the Link header.
func (g *GitHub) list(w http.ResponseWriter, r *http.Request) {
	per := 30
	if s := r.URL.Query().Get("per_page"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			apiError(w, http.StatusUnprocessableEntity, "Invalid per_page")
			return
		}
		per = min(n, 100)
	}
	if g.MaxPerPage > 0 {
		per = min(per, g.MaxPerPage)
	}
	before := int64(-1)
	if s := r.URL.Query().Get("cursor"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			apiError(w, http.StatusBadRequest, "Invalid cursor")
			return
		}
		before = n
	}
	g.mu.Lock()
	page := []GitHubDelivery{}
	more := false
	for i := len(g.deliveries) - 1; i >= 0; i-- {
		d := g.deliveries[i]
		if before >= 0 && d.ID >= before {
			continue
		}
		if len(page) == per {
			more = true
			break
		}
		page = append(page, *d)
	}
	g.Listed++
	g.mu.Unlock()
	if more {
		next := fmt.Sprintf("http://%s%s?per_page=%d&cursor=%d", r.Host, r.URL.Path, per, page[len(page)-1].ID)
		w.Header().Set("Link", "<"+next+`>; rel="next"`)
	}
	writeJSON(w, http.StatusOK, page)
}

// redeliver answers POST .../deliveries/{delivery_id}/attempts: 202,
// and a new delivery of the same guid, marked redelivery, is attempted.
func (g *GitHub) redeliver(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("delivery_id"), 10, 64)
	var orig *GitHubDelivery
	g.mu.Lock()
	for _, d := range g.deliveries {
		if err == nil && d.ID == id {
			orig = d
		}
	}
	if orig != nil {
		g.Redelivered = append(g.Redelivered, id)
	}
	g.mu.Unlock()
	if orig == nil {
		apiError(w, http.StatusNotFound, "Not Found")
		return
	}
	g.attempt(&GitHubDelivery{GUID: orig.GUID, Event: orig.Event, Action: orig.Action, Redelivery: true, payload: orig.payload}, Reached)
	writeJSON(w, http.StatusAccepted, map[string]any{})
}

// checked refuses what GitHub refuses: an API version it does not know
// (400), and a request without valid credentials (401).
func (g *GitHub) checked(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("X-GitHub-Api-Version"); v != "" && v != "2022-11-28" {
			apiError(w, http.StatusBadRequest, "API version "+v+" not supported")
			return
		}
		auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			auth, ok = strings.CutPrefix(r.Header.Get("Authorization"), "token ")
		}
		if !ok || !g.authorized(auth) {
			apiError(w, http.StatusUnauthorized, "Bad credentials")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (g *GitHub) authorized(cred string) bool {
	if g.AppKey == nil {
		return g.Token != "" && hmac.Equal([]byte(cred), []byte(g.Token))
	}
	var claims jwt.RegisteredClaims
	tok, err := jwt.ParseWithClaims(cred, &claims, func(*jwt.Token) (any, error) { return g.AppKey, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithIssuedAt(), jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(g.now), jwt.WithLeeway(time.Minute))
	if err != nil || !tok.Valid || claims.Issuer != strconv.FormatInt(g.AppID, 10) {
		return false
	}
	// GitHub refuses a JWT that lives longer than 10 minutes.
	return claims.ExpiresAt.Sub(claims.IssuedAt.Time) <= 10*time.Minute
}

func (g *GitHub) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

func (g *GitHub) client() *http.Client {
	if g.Client != nil {
		return g.Client
	}
	return &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 30 * time.Second}
}

func apiError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"message": msg, "documentation_url": "https://docs.github.com/rest"})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
