package inbound

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/hookpace/hookpace/proxy"
	"github.com/hookpace/hookpace/spool"
	"github.com/hookpace/hookpace/webpath"
)

// HeaderFetched marks a webhook that catch-up fetched from the provider's
// API rather than received at the door: its value names the provider.
// Such a webhook carries no provider signature (the route's own sign
// block, if any, still signs it). The door drops the header from every
// request a client sends it, passed through or not, so only catch-up
// sets it.
const HeaderFetched = "Hookpace-Fetched"

// Seer says whether a delivery id is remembered for a host within a
// dedupe scope; *spool.Spool is the real one.
type Seer interface {
	Seen(host, scope, key string) bool
}

// Seen reports whether the route has taken the webhook whose delivery id
// is key (within the app host's dedupe window): every target without a
// filter has a copy, or, when each target filters, one has. A route
// without a Seer sees nothing.
func (rt *Route) Seen(key string) bool {
	if rt.opts.Seen == nil || key == "" {
		return false
	}
	some, all, unfiltered := false, true, false
	for _, t := range rt.targets {
		scope := rt.opts.Route.Name
		if t.Name != "" {
			scope += "\x00" + t.Name
		}
		ok := rt.opts.Seen.Seen(t.Host, spool.DoorScope(scope), key)
		some = some || ok
		if t.Filter == nil {
			unfiltered = true
			all = all && ok
		}
	}
	if unfiltered {
		return all
	}
	return some
}

// Fetched is what became of a webhook taken by TakeFetched.
type Fetched int

// What TakeFetched did: stored a copy for at least one target; found
// every copy there already (nothing stored); found no target whose
// filter takes it (nothing stored).
const (
	FetchedStored Fetched = iota
	FetchedDuplicate
	FetchedFiltered
)

// TakeFetched takes in a webhook that the provider's API gave rather
// than posted to the door (catch-up): a POST of body to path, with no
// signature to check, marked with HeaderFetched: from. It goes through
// the route's filters, rewrites and dedupe like any webhook, so a
// delivery id the route has taken is not stored again. An error says why
// it was not stored (a full spool, a copy that cannot be built); the
// caller tries again later.
func (rt *Route) TakeFetched(ctx context.Context, from, path string, body []byte) (Fetched, error) {
	start := rt.opts.Now()
	p, err := webpath.Normalize(path)
	if err != nil {
		return 0, err
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://hookpace.invalid"+p.Clean, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	r.RemoteAddr = "catch_up"
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(HeaderFetched, from)
	var doc map[string]json.RawMessage
	_ = json.Unmarshal(body, &doc) // not JSON: no field matches
	in := proxy.Inbound{Route: rt.opts.Route.Name, Key: rt.deliveryID(r.Header, doc)}
	takes, err := rt.take(r, p, doc, body, &in, start)
	if errors.Is(err, errFiltered) {
		return FetchedFiltered, nil
	}
	if err != nil {
		return 0, err
	}
	how := FetchedDuplicate
	for _, t := range takes {
		if !t.Accepted() {
			return 0, fmt.Errorf("the spool refused it: %d %s", t.Status, strings.TrimSpace(string(t.Body)))
		}
		if t.Header.Get(proxy.HeaderDuplicate) == "" {
			how = FetchedStored
		}
	}
	rt.opts.Logger.LogAttrs(ctx, slog.LevelInfo, "inbound",
		slog.String("decision", "fetched"), slog.String("route", rt.opts.Route.Name), slog.String("from", from),
		slog.String("path", p.Clean), slog.String("delivery", in.Key), slog.Bool("duplicate", how == FetchedDuplicate),
		slog.Int64("duration_us", rt.opts.Now().Sub(start).Microseconds()))
	return how, nil
}

// dropFetched removes HeaderFetched from what a client sends to the
// door, webhook or not: only catch-up marks one as fetched.
func dropFetched(h http.Header) {
	delete(h, HeaderFetched)
}
