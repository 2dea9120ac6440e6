package admin

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/hookpace/hookpace/fleet"
)

// GET /v1/hosts?scope=fleet is the fleet's view: every live replica's
// summary of its hosts (published with its heartbeat, a few seconds old
// at most), merged per host, with each replica's part. It pages like
// /v1/hosts (limit=, default DefaultHostsLimit, 0: all; cursor=), sorted
// by name; host= is not supported there. Each page costs one Redis round
// trip with at most limit members per live replica.

// FleetView reads the fleet's view: its hosts, and which replica a spool
// is (for an id of another spool, messages_fleet.go); *fleet.Limiter is
// the real one.
type FleetView interface {
	View(ctx context.Context, cursor string, limit int) (fleet.ViewPage, error)
	SpoolOwner(ctx context.Context, spool uint64) (fleet.Owner, bool, error)
}

var _ FleetView = (*fleet.Limiter)(nil)

// hosts serves GET /v1/hosts: this replica's hosts, or with scope=fleet
// the fleet's view.
func (a *api) hosts(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Query().Get("scope") {
	case "", "replica":
		a.listHosts(w, r)
	case "fleet":
		a.fleetHosts(w, r)
	default:
		writeError(w, http.StatusBadRequest, "bad scope "+strconv.Quote(r.URL.Query().Get("scope"))+": want replica or fleet")
	}
}

func (a *api) fleetHosts(w http.ResponseWriter, r *http.Request) {
	if a.Fleet == nil {
		writeError(w, http.StatusNotFound, "scope=fleet: no fleet section in the config (this hookpace runs alone)")
		return
	}
	q := r.URL.Query()
	if q.Get("host") != "" {
		writeError(w, http.StatusBadRequest, "host= is not supported with scope=fleet: page with limit= and cursor=")
		return
	}
	limit := DefaultHostsLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "bad limit "+strconv.Quote(v)+": want a count, 0 for all")
			return
		}
		limit = n
	}
	page, err := a.Fleet.View(r.Context(), q.Get("cursor"), limit)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "fleet view: "+err.Error())
		return
	}
	if page.Hosts == nil {
		page.Hosts = []fleet.FleetHost{}
	}
	writeJSON(w, http.StatusOK, page)
}

// FleetPage asks for one page of GET /v1/hosts?scope=fleet.
func (c *Client) FleetPage(ctx context.Context, cursor string, limit int) (fleet.ViewPage, error) {
	v := url.Values{"scope": {"fleet"}, "limit": {strconv.Itoa(limit)}}
	if cursor != "" {
		v.Set("cursor", cursor)
	}
	var page fleet.ViewPage
	err := c.do(ctx, http.MethodGet, "/v1/hosts", v, &page)
	return page, err
}

// FleetHosts reads the whole fleet view, a page at a time, and its first
// page (the live replicas, and those that found a host's state lost).
func (c *Client) FleetHosts(ctx context.Context) ([]fleet.FleetHost, fleet.ViewPage, error) {
	var all []fleet.FleetHost
	var first fleet.ViewPage
	cursor := ""
	for i := 0; ; i++ {
		page, err := c.FleetPage(ctx, cursor, DefaultHostsLimit)
		if err != nil {
			return nil, first, err
		}
		if i == 0 {
			first = page
		}
		all = append(all, page.Hosts...)
		if page.NextCursor == "" || page.NextCursor == cursor {
			return all, first, nil
		}
		cursor = page.NextCursor
	}
}
