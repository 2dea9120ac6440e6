package proxy

import (
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// Inbound is how a webhook that came through an inbound route (a
// provider's POST to the app's own endpoint, package inbound) is taken in:
// the route has verified it and rewritten its URL to the app's; from here
// it is spooled, deduplicated and answered exactly as a proxied POST is.
type Inbound struct {
	Route string // the route's name, for the ingest line
	// Key is the provider's delivery id, the webhook's idempotency key
	// for the app's host; "" = none.
	Key string
	// Status and Body answer a webhook once it is durable (and a repeat
	// of one); Status 0: 202 with hookpace's JSON.
	Status int
	Body   []byte
	// Target names the route's target this copy is for, and Webhook is
	// the door's id of the webhook its copies share; both "" for a route
	// with one unnamed target.
	Target  string
	Webhook string
}

// Taken is the door's answer to one target's copy of an inbound webhook:
// its status, headers and body, and the copy's id when it was stored or
// is a repeat.
type Taken struct {
	Status int
	Header http.Header
	Body   []byte
	ID     string
}

// Accepted reports whether the copy is durable (stored now or before).
func (t Taken) Accepted() bool { return t.Status == http.StatusAccepted }

// ServeInbound takes in r, whose URL is the app's absolute URL and whose
// body is the provider's, and answers it: once durable with in's answer,
// else as the proxy answers (429 or 503 with Retry-After, 413, ...).
func (p *Proxy) ServeInbound(w http.ResponseWriter, r *http.Request, in Inbound) {
	t := p.TakeInbound(r, in)
	if t.Accepted() && in.Status != 0 {
		for k, vs := range t.Header {
			w.Header()[k] = vs
		}
		w.Header().Del("Content-Type") // the route's body, not hookpace's JSON
		if len(in.Body) > 0 {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(in.Body)))
		w.WriteHeader(in.Status)
		w.Write(in.Body)
		return
	}
	for k, vs := range t.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(t.Status)
	w.Write(t.Body)
}

// TakeInbound takes in r as ServeInbound does and returns the answer
// unwritten, for a door that answers for several targets' copies at once.
// An accepted copy's headers carry X-Hookpace-Id.
func (p *Proxy) TakeInbound(r *http.Request, in Inbound) Taken {
	start := time.Now()
	pol := p.policy.Load()
	host := HostKey(r.URL)
	d, size := p.decide(r.Context(), r, pol, host, "", &in)
	d.route = in.Route
	p.record(r, start, host, size, d)
	h := http.Header{}
	body := d.answer(h, host)
	if d.status == http.StatusAccepted {
		h.Set("X-Hookpace-Id", d.id)
	}
	return Taken{Status: d.status, Header: h, Body: body, ID: d.id}
}

// inboundKey checks a provider's delivery id as an idempotency key for a
// host whose dedupe window is window: "" when there is none or dedupe is
// off for the host.
func inboundKey(key string, window time.Duration) (string, *decision) {
	if key == "" || window <= 0 {
		return "", nil
	}
	if len(key) > spool.MaxIdempotencyKey {
		d := badRequest("delivery id longer than " + strconv.Itoa(spool.MaxIdempotencyKey) + " bytes")
		return "", &d
	}
	return key, nil
}

// markDoor sets m's HeaderDoor mark: the route's name for a webhook that
// came through an inbound route (in), none for anything else, whatever
// the client sent.
func markDoor(m *spool.Message, in *Inbound) {
	delete(m.Header, spool.HeaderDoor)
	delete(m.Header, spool.HeaderDoorWebhook)
	delete(m.Header, spool.HeaderDoorTarget)
	if in != nil {
		m.Header.Set(spool.HeaderDoor, in.Route)
		if in.Target != "" {
			m.Header.Set(spool.HeaderDoorTarget, in.Target)
			m.Header.Set(spool.HeaderDoorWebhook, in.Webhook)
		}
	}
}

// handedDoor keeps the HeaderDoor mark of a checked hand-off (m.OriginSpool
// set: handoffOrigin checked its claim with the shared secret): the
// webhook came through a door of the hookpace that handed it over.
func handedDoor(m *spool.Message, r *http.Request) {
	if m.OriginSpool != 0 && len(r.Header[spool.HeaderDoor]) == 1 {
		m.Header[spool.HeaderDoor] = r.Header[spool.HeaderDoor]
		for _, k := range []string{spool.HeaderDoorWebhook, spool.HeaderDoorTarget} {
			if vs := r.Header[k]; len(vs) == 1 {
				m.Header[k] = vs
			}
		}
	}
}

// keyScope is the dedupe scope of a webhook: the proxy user's for the
// proxy's doors, the route's own for an inbound route's, and each
// target's own for a route with several, so that one delivery id is
// taken once per target (two targets may share a host).
func keyScope(user string, in *Inbound) string {
	if in != nil && in.Target != "" {
		return spool.DoorScope(in.Route + "\x00" + in.Target)
	}
	if in != nil {
		return spool.DoorScope(in.Route)
	}
	return user
}

// App is the app behind an inbound route: its webhooks enter through the
// route's door, verified there, and nowhere else.
type App struct {
	Route string // the route's name
	Host  string // To's host: a lower-case name, or an IP literal
	Port  uint16 // To's port, the scheme's default when it has none
}

// NewApp is the App of the route named route whose app's base URL is to.
func NewApp(route, to string) (App, error) {
	u, err := url.Parse(to)
	if err != nil {
		return App{}, err
	}
	return App{Route: route, Host: strings.ToLower(strings.TrimSuffix(u.Hostname(), ".")), Port: destPort(u)}, nil
}

// is reports whether u's host and port are a's: an IP literal by its
// address (::ffff:127.0.0.1 is 127.0.0.1), and every loopback address,
// the unspecified ones (which dial the local host) and localhost as one
// local host, since an app on one of them may listen on all.
func (a App) is(u *url.URL) bool {
	if destPort(u) != a.Port {
		return false
	}
	h := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if h == a.Host || local(h) && local(a.Host) {
		return true
	}
	x, err1 := netip.ParseAddr(h)
	y, err2 := netip.ParseAddr(a.Host)
	return err1 == nil && err2 == nil && x.Unmap() == y.Unmap()
}

// local reports whether host (lower case) names this machine: localhost,
// a name under .localhost (RFC 6761), a loopback or unspecified address.
func local(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && (ip.Unmap().IsLoopback() || ip.IsUnspecified() || ip.Unmap().IsUnspecified())
}

// appRefusal is the 403 of a request that a proxy door (the proxy
// listener, a tunnel, capture) is asked to send to an inbound route's
// app: what reaches the app's webhook paths must have been verified at
// its route's door, and only that door's webhooks carry the route's
// signature and claim its delivery ids.
func (pol *Policy) appRefusal(u *url.URL) (decision, bool) {
	for _, a := range pol.Apps {
		if a.is(u) {
			return decision{outcome: outcomeRefused, status: http.StatusForbidden,
				reason: u.Host + " is the app behind inbound route " + strconv.Quote(a.Route) +
					": requests to it enter through that route's listener, not the proxy"}, true
		}
	}
	return decision{}, false
}

// DrainRefusal writes a refusal (status and body, its headers already
// set) of an inbound webhook whose body the door read n bytes of and
// not to its end, as the proxy's own door does (drainAfter): when more
// is unread than Go's server discards by itself, the rest is read and
// discarded, up to 4x maxBody (at least drainMin) or drainTime, so that
// a client that writes its whole body before reading reads the answer
// instead of a connection reset. The connection is closed after.
func DrainRefusal(w http.ResponseWriter, r *http.Request, status int, body []byte, n, maxBody int64) {
	seen := &seenBody{ReadCloser: r.Body, n: n}
	if seen.mustDrain(r) {
		drainAfter(w, r, status, body, max(4*maxBody, drainMin))
		return
	}
	w.Header().Set("Connection", "close")
	w.WriteHeader(status)
	w.Write(body)
}
