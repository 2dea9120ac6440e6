package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hookpace/hookpace/fleet"
)

// viewOf is a FleetView that answers with a fixed page (or error) and
// records what it was asked; owners are the replicas of the spools it
// knows.
type viewOf struct {
	page   fleet.ViewPage
	err    error
	cursor string
	limit  int
	owners map[uint64]fleet.Owner
}

func (v *viewOf) SpoolOwner(_ context.Context, spool uint64) (fleet.Owner, bool, error) {
	o, ok := v.owners[spool]
	return o, ok, v.err
}

func (v *viewOf) View(_ context.Context, cursor string, limit int) (fleet.ViewPage, error) {
	v.cursor, v.limit = cursor, limit
	return v.page, v.err
}

func TestFleetScope(t *testing.T) {
	page := fleet.ViewPage{Hosts: []fleet.FleetHost{{Host: "a.example", Queued: 8}}, Replicas: []string{"r1", "r2"}, NextCursor: "a.example"}
	v := &viewOf{page: page}
	get := func(o Options, q string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/v1/hosts?"+q, nil)
		r.Host = "127.0.0.1"
		w := httptest.NewRecorder()
		Handler(o).ServeHTTP(w, r)
		return w
	}
	sp := emptySpool(t)
	o := Options{Hosts: manyHosts(nil), Spool: sp, Journal: journalOf(sp), Fleet: v}
	w := get(o, "scope=fleet&limit=1&cursor=0.example")
	var got fleet.ViewPage
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &got) != nil || got.Hosts[0].Queued != 8 || got.NextCursor != "a.example" {
		t.Fatalf("scope=fleet: %d %s", w.Code, w.Body)
	}
	if v.cursor != "0.example" || v.limit != 1 {
		t.Fatalf("asked cursor %q limit %d", v.cursor, v.limit)
	}
	if get(o, "scope=fleet").Code != 200 || v.limit != DefaultHostsLimit {
		t.Fatalf("default limit %d, want %d", v.limit, DefaultHostsLimit)
	}
	for q, code := range map[string]int{"scope=fleet&host=a": 400, "scope=fleet&limit=-1": 400, "scope=all": 400, "scope=replica": 200} {
		if w := get(o, q); w.Code != code {
			t.Fatalf("%s: %d %s, want %d", q, w.Code, w.Body, code)
		}
	}
	if w := get(Options{Hosts: manyHosts(nil), Spool: sp, Journal: journalOf(sp)}, "scope=fleet"); w.Code != 404 {
		t.Fatalf("without a fleet: %d %s", w.Code, w.Body)
	}
	v.err = errors.New("redis away")
	if w := get(o, "scope=fleet"); w.Code != 503 {
		t.Fatalf("redis away: %d %s", w.Code, w.Body)
	}
}
