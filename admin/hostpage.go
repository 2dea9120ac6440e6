package admin

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/hookpace/hookpace/deliver"
)

// GET /v1/hosts pages: at 50,000 hosts the whole list is tens of MB.
// Hosts come sorted by name; host= keeps those whose name contains it
// (any case); limit= is the most per page (DefaultHostsLimit unless given;
// 0: all, streamed); cursor= is the next_cursor of the page before. The
// answer's total counts every host the filter keeps.

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
	names, page := pageNames(a.Hosts.HostNames(), hq)
	page.Fleet = a.Hosts.Fleet()
	if hq.Limit == 0 {
		a.streamHosts(w, names, page)
		return
	}
	page.Hosts = a.Hosts.HostsNamed(names)
	writeJSON(w, http.StatusOK, page)
}

// streamChunk is how many hosts' statuses a streamed answer builds at a
// time: what it holds in memory, however many hosts there are.
const streamChunk = 500

// streamHosts writes page with the statuses of names, byte for byte as
// writeJSON would, building and writing them streamChunk at a time, so
// that limit=0 at 50,000 hosts holds a chunk rather than the whole answer
// (28 MB) and its first bytes leave at once.
func (a *api) streamHosts(w http.ResponseWriter, names []string, page HostPage) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.WriteString("{\n  \"hosts\": [")
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("    ", "  ")
	for i := 0; i < len(names); i += streamChunk {
		for j, st := range a.Hosts.HostsNamed(names[i:min(i+streamChunk, len(names))]) {
			if i+j > 0 {
				bw.WriteByte(',')
			}
			bw.WriteString("\n    ")
			buf.Reset()
			if err := enc.Encode(st); err != nil {
				// The status line is gone: a cut answer is invalid JSON,
				// which the client sees, and the log says why.
				slog.Warn("hosts stream", "host", st.Host, "err", err)
				bw.Flush()
				return
			}
			bw.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
		}
	}
	if len(names) > 0 {
		bw.WriteString("\n  ")
	}
	bw.WriteString("],")
	page.Hosts = nil
	buf.Reset()
	enc.SetIndent("", "  ")
	if err := enc.Encode(struct {
		Total      int                  `json:"total"`
		NextCursor string               `json:"next_cursor,omitempty"`
		Fleet      *deliver.FleetStatus `json:"fleet,omitempty"`
	}{page.Total, page.NextCursor, page.Fleet}); err != nil {
		slog.Warn("hosts stream", "err", err)
		bw.Flush()
		return
	}
	bw.Write(bytes.TrimPrefix(buf.Bytes(), []byte("{")))
	bw.Flush()
}

// pageNames selects q's page of all, by name: the names in it, and the
// page's total and cursor.
func pageNames(all []string, q HostQuery) ([]string, HostPage) {
	want := strings.ToLower(q.Host)
	kept := make([]string, 0, len(all))
	for _, h := range all {
		if want == "" || strings.Contains(strings.ToLower(h), want) {
			kept = append(kept, h)
		}
	}
	slices.Sort(kept)
	page := HostPage{Total: len(kept)}
	if q.Cursor != "" {
		i, _ := slices.BinarySearch(kept, q.Cursor)
		for i < len(kept) && kept[i] <= q.Cursor {
			i++
		}
		kept = kept[i:]
	}
	if q.Limit > 0 && len(kept) > q.Limit {
		kept = kept[:q.Limit]
		page.NextCursor = kept[len(kept)-1]
	}
	return kept, page
}
