package admin

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookpace/hookpace/deliver"
)

// GET /v1/hosts pages: at 50,000 hosts the whole list is tens of MB.
// Hosts come sorted by name; host= keeps those whose name contains it
// (any case); limit= is the most per page (DefaultHostsLimit unless given;
// 0: all); cursor= is the next_cursor of the page before. The answer's
// total counts every host the filter keeps.

// DefaultHostsLimit is the page size of GET /v1/hosts without limit=.
const DefaultHostsLimit = 1000

// HostPage is one page of GET /v1/hosts.
type HostPage struct {
	Hosts []deliver.HostStatus `json:"hosts"`
	Total int                  `json:"total"`
	// NextCursor, when set, asks for the next page; absent on the last.
	NextCursor string               `json:"next_cursor,omitempty"`
	Fleet      *deliver.FleetStatus `json:"fleet,omitempty"`
}

// HostQuery selects a page of hosts.
type HostQuery struct {
	Host   string // name contains it (any case); "": all
	Limit  int    // at most this many; 0: all
	Cursor string // after this page's NextCursor
}

func (a *api) listHosts(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	hq := HostQuery{Host: q.Get("host"), Limit: DefaultHostsLimit, Cursor: q.Get("cursor")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "bad limit "+strconv.Quote(v)+": want a count, 0 for all")
			return
		}
		hq.Limit = n
	}
	snap := TakeSnapshot(a.Hosts, a.Spool, time.Now(), false)
	page := pageHosts(snap.Hosts, hq)
	page.Fleet = snap.Fleet
	writeJSON(w, http.StatusOK, page)
}

// pageHosts selects q's page of all.
func pageHosts(all []deliver.HostStatus, q HostQuery) HostPage {
	want := strings.ToLower(q.Host)
	kept := make([]deliver.HostStatus, 0, len(all))
	for _, h := range all {
		if want == "" || strings.Contains(strings.ToLower(h.Host), want) {
			kept = append(kept, h)
		}
	}
	slices.SortFunc(kept, func(a, b deliver.HostStatus) int { return strings.Compare(a.Host, b.Host) })
	page := HostPage{Total: len(kept)}
	if q.Cursor != "" {
		i, _ := slices.BinarySearchFunc(kept, q.Cursor, func(h deliver.HostStatus, c string) int { return strings.Compare(h.Host, c) })
		for i < len(kept) && kept[i].Host <= q.Cursor {
			i++
		}
		kept = kept[i:]
	}
	if q.Limit > 0 && len(kept) > q.Limit {
		kept = kept[:q.Limit]
		page.NextCursor = kept[len(kept)-1].Host
	}
	page.Hosts = kept
	return page
}
