package inbound

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/proxy"
	"github.com/hookpace/hookpace/rewrite"
	"github.com/hookpace/hookpace/webpath"
)

// target is one of a route's targets, with its parsed base URL.
type target struct {
	config.InboundTarget
	base *url.URL
}

func newTargets(rc config.InboundRoute) ([]target, error) {
	ts := rc.Targets
	if len(ts) == 0 {
		ts = []config.InboundTarget{{URL: rc.To, Host: rc.Host}}
	}
	out := make([]target, len(ts))
	for i, t := range ts {
		u, err := url.Parse(t.URL)
		if err != nil {
			return nil, err
		}
		out[i] = target{InboundTarget: t, base: u}
	}
	return out, nil
}

// takes reports whether t's filter picks the webhook r (at path p, with
// JSON body doc); a target without a filter takes every webhook.
func (t *target) takes(r *http.Request, p webpath.Path, doc map[string]json.RawMessage) bool {
	f := t.Filter
	if f == nil {
		return true
	}
	if f.Path != "" && !p.Match(f.Path) {
		return false
	}
	var v string
	switch {
	case f.JSON != "":
		v = jsonString(doc[f.JSON])
	case f.Header != "":
		v = r.Header.Get(f.Header)
	default:
		return true
	}
	if f.Equals != nil {
		return v == *f.Equals
	}
	return f.Matches == nil || f.Matches.MatchString(v)
}

// fanOut takes in a verified webhook (r, whose body is body) for each
// target whose filter picks it, each as its own copy in the spool: its
// own delivery, pacing, dead letter and replay. The copies are taken
// together, so that one group commit usually makes them all durable, and
// the provider is answered 2xx only once every copy is durable (stored
// now or by an earlier delivery of the same id). Otherwise it gets the
// first refusal, and retries: with a dedupe key, a retry stores only the
// copies that were missing.
func (rt *Route) fanOut(w http.ResponseWriter, r *http.Request, p webpath.Path, doc map[string]json.RawMessage, body []byte, in proxy.Inbound, start time.Time) {
	takes, err := rt.take(r, p, doc, body, &in, start)
	switch {
	case errors.Is(err, errFiltered):
		rt.opts.Logger.LogAttrs(r.Context(), slog.LevelInfo, "inbound",
			slog.String("decision", "filtered"), slog.String("route", rt.opts.Route.Name), slog.Int("status", http.StatusOK),
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("reason", "no target's filter takes it"),
			slog.Int64("duration_us", rt.opts.Now().Sub(start).Microseconds()), slog.String("remote", r.RemoteAddr))
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "hookpace: no target of route "+strconv.Quote(rt.opts.Route.Name)+" takes this webhook (filters); nothing stored\n")
	case err != nil:
		rt.refuse(w, r, start, http.StatusBadRequest, "rewrite", err.Error())
	default:
		rt.answer(w, takes, in)
	}
}

// errFiltered: no target's filter takes the webhook.
var errFiltered = errors.New("no target's filter takes it")

// take stores a copy of the webhook r for each target whose filter picks
// it, and returns each copy's answer; errFiltered when none picks it, or
// an error naming the target whose copy cannot be built, with nothing
// stored.
func (rt *Route) take(r *http.Request, p webpath.Path, doc map[string]json.RawMessage, body []byte, in *proxy.Inbound, start time.Time) ([]proxy.Taken, error) {
	var picked []*target
	for i := range rt.targets {
		if rt.targets[i].takes(r, p, doc) {
			picked = append(picked, &rt.targets[i])
		}
	}
	if len(picked) == 0 {
		return nil, errFiltered
	}
	if rt.targets[0].Name != "" {
		in.Webhook = newWebhookID()
	}
	// Every copy is built before any is stored: a copy that can't be
	// (its rewrite needs JSON) refuses the webhook with nothing stored.
	fwds := make([]*http.Request, len(picked))
	for i, t := range picked {
		fwd, err := rt.copyFor(r, t, body, start)
		if err != nil {
			return nil, errors.New("target " + strconv.Quote(t.Name) + ": " + err.Error())
		}
		fwds[i] = fwd
	}
	takes := make([]proxy.Taken, len(picked))
	var wg sync.WaitGroup
	for i, t := range picked {
		tin := *in
		tin.Target = t.Name
		wg.Add(1)
		go func() {
			defer wg.Done()
			takes[i] = rt.opts.Ingest.TakeInbound(fwds[i], tin)
		}()
	}
	wg.Wait()
	for i, t := range takes {
		if t.Status == http.StatusUnprocessableEntity {
			takes[i] = takenBefore()
		}
	}
	return takes, nil
}

// takenBefore is the answer to a copy whose delivery id the route took
// before with another body (the spool's conflict, 422): a duplicate,
// nothing stored. The provider's id names one event, whose body it may
// render anew (a redelivery, an event fetched from its API by catch-up);
// refusing it would have the provider retry what is durable already.
func takenBefore() proxy.Taken {
	return proxy.Taken{Status: http.StatusAccepted,
		Header: http.Header{proxy.HeaderDuplicate: {"true"}, "Content-Type": {"text/plain; charset=utf-8"}},
		Body:   []byte("hookpace: this delivery id was taken before (with another body); nothing stored\n")}
}

// copyFor is the request of t's copy: its URL is t's base and r's path
// and query; t's rewrite rules are applied to its headers and body.
func (rt *Route) copyFor(r *http.Request, t *target, body []byte, start time.Time) (*http.Request, error) {
	fwd := r.Clone(r.Context())
	fwd.URL = appURL(t.base, r.URL)
	fwd.Host = fwd.URL.Host
	fwd.RequestURI = ""
	if j := t.Rewrite.JSON; j != nil {
		out, _, err := j.Apply(body)
		if errors.Is(err, rewrite.ErrNotJSON) {
			return nil, errors.New("body is not JSON, and the target's rewrite.json rules need JSON")
		}
		if err != nil {
			return nil, errors.New("rewrite: " + err.Error())
		}
		body = out
	}
	t.Rewrite.Headers.Apply(fwd.Header)
	fwd.Body = io.NopCloser(bytes.NewReader(body))
	fwd.ContentLength = int64(len(body))
	fwd.Header.Set(HeaderReceivedAt, start.UTC().Format(time.RFC3339Nano))
	return fwd, nil
}

// answer writes the door's answer to the provider from its copies':
// the route's answer (or hookpace's JSON, with every copy's id) when all
// are durable, else the first refusal.
func (rt *Route) answer(w http.ResponseWriter, takes []proxy.Taken, in proxy.Inbound) {
	var ids []string
	for _, t := range takes {
		if !t.Accepted() {
			for k, vs := range t.Header {
				w.Header()[k] = vs
			}
			w.WriteHeader(t.Status)
			w.Write(t.Body)
			return
		}
		ids = append(ids, t.ID)
	}
	first := takes[0]
	for k, vs := range first.Header {
		w.Header()[k] = vs
	}
	w.Header().Set("X-Hookpace-Id", strings.Join(ids, ", "))
	if in.Webhook != "" {
		w.Header().Set("X-Hookpace-Webhook", in.Webhook)
	}
	if in.Status == 0 {
		w.WriteHeader(first.Status)
		w.Write(first.Body)
		return
	}
	w.Header().Del("Content-Type") // the route's body, not hookpace's JSON
	if len(in.Body) > 0 {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(in.Body)))
	w.WriteHeader(in.Status)
	w.Write(in.Body)
}

// newWebhookID is the door's id of one webhook, shared by its copies.
func newWebhookID() string {
	var b [12]byte
	rand.Read(b[:])
	return "wh_" + hex.EncodeToString(b[:])
}
