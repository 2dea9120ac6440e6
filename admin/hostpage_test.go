package admin

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/spool"
)

type manyHosts []deliver.HostStatus

// emptySpool is a real spool with nothing in it, closed after the test.
func emptySpool(t *testing.T) *spool.Spool {
	t.Helper()
	sp, err := openJournaled(spool.Options{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	return sp
}

func (m manyHosts) Hosts() []deliver.HostStatus { return m }
func (m manyHosts) HostNames() []string {
	out := make([]string, len(m))
	for i, h := range m {
		out[i] = h.Host
	}
	return out
}
func (m manyHosts) HostsNamed(names []string) []deliver.HostStatus {
	var out []deliver.HostStatus
	for _, n := range names {
		for _, h := range m {
			if h.Host == n {
				out = append(out, h)
			}
		}
	}
	return out
}
func (m manyHosts) Host(string) (deliver.HostStatus, bool) {
	return deliver.HostStatus{}, false
}
func (m manyHosts) Pause(string) error          { return nil }
func (m manyHosts) Resume(string) (bool, error) { return false, nil }
func (m manyHosts) Fleet() *deliver.FleetStatus { return nil }
func (m manyHosts) Purge(host string, _ deliver.Selection) (deliver.BacklogResult, error) {
	return deliver.BacklogResult{Host: host}, nil
}
func (m manyHosts) BuryQueue(host string, _ deliver.Selection) (deliver.BacklogResult, error) {
	return deliver.BacklogResult{Host: host}, nil
}

// At 50,000 hosts /v1/hosts was 28 MB in one answer. It pages
// (limit, cursor) in host order, filters by name (host=), and says the
// total; following next_cursor gives every host once.
func TestHostsPaged(t *testing.T) {
	var hosts manyHosts
	for i := 2499; i >= 0; i-- { // out of order
		hosts = append(hosts, deliver.HostStatus{Host: fmt.Sprintf("p%04d.example", i)})
	}
	sp := emptySpool(t)
	h := Handler(Options{Hosts: hosts, Spool: sp, Journal: journalOf(sp)})
	get := func(query string) (int, HostPage) {
		r := httptest.NewRequest(http.MethodGet, "/v1/hosts"+query, nil)
		r.Host = "127.0.0.1"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var page HostPage
		json.Unmarshal(w.Body.Bytes(), &page)
		return w.Code, page
	}
	_, first := get("")
	if len(first.Hosts) != DefaultHostsLimit || first.Total != 2500 || first.NextCursor == "" {
		t.Fatalf("without limit: %d hosts, total %d, next %q; want %d of 2500 and a cursor",
			len(first.Hosts), first.Total, first.NextCursor, DefaultHostsLimit)
	}
	seen, cursor, pages := 0, "", 0
	for {
		code, page := get("?limit=300&cursor=" + cursor)
		if code != http.StatusOK || len(page.Hosts) > 300 {
			t.Fatalf("page %d: %d, %d hosts", pages, code, len(page.Hosts))
		}
		for _, x := range page.Hosts {
			if want := fmt.Sprintf("p%04d.example", seen); x.Host != want {
				t.Fatalf("host %d is %s, want %s", seen, x.Host, want)
			}
			seen++
		}
		pages++
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if seen != 2500 || pages != 9 {
		t.Fatalf("%d hosts over %d pages, want 2500 over 9", seen, pages)
	}
	if _, page := get("?host=P012&limit=0"); page.Total != 10 || len(page.Hosts) != 10 || page.NextCursor != "" {
		t.Errorf("host=P012: %d hosts, total %d, next %q; want p0120..p0129", len(page.Hosts), page.Total, page.NextCursor)
	}
	if code, _ := get("?limit=-1"); code != http.StatusBadRequest {
		t.Errorf("limit=-1: %d, want 400", code)
	}
}

// statusCounter is manyHosts that counts the statuses built.
type statusCounter struct {
	manyHosts
	all   int // calls of Hosts: every host's status
	built int // statuses built by name
	most  int // the most built by one call
}

func (c *statusCounter) Hosts() []deliver.HostStatus { c.all++; return c.manyHosts }
func (c *statusCounter) HostsNamed(names []string) []deliver.HostStatus {
	c.built += len(names)
	c.most = max(c.most, len(names))
	return c.manyHosts.HostsNamed(names)
}

// A page of /v1/hosts builds the status of its own hosts only: at 50,000
// hosts, building all of them took most of a page's 2.3 s.
func TestHostsPageBuildsOnlyItsHosts(t *testing.T) {
	c := &statusCounter{}
	for i := range 3000 {
		c.manyHosts = append(c.manyHosts, deliver.HostStatus{Host: fmt.Sprintf("p%04d.example", i)})
	}
	sp := emptySpool(t)
	h := Handler(Options{Hosts: c, Spool: sp, Journal: journalOf(sp)})
	r := httptest.NewRequest(http.MethodGet, "/v1/hosts?limit=10&cursor=p0100.example", nil)
	r.Host = "127.0.0.1"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var page HostPage
	json.Unmarshal(w.Body.Bytes(), &page)
	if w.Code != http.StatusOK || len(page.Hosts) != 10 || page.Hosts[0].Host != "p0101.example" || page.Total != 3000 {
		t.Fatalf("page: %d, %d hosts from %v, total %d", w.Code, len(page.Hosts), page.Hosts, page.Total)
	}
	if c.all != 0 || c.built != 10 {
		t.Errorf("one page of 10 built %d statuses by name and asked for every host's %d times, want 10 and 0", c.built, c.all)
	}
}

// limit=0 streams every host: the answer is byte for byte what one
// encoding of the whole page gives, built a chunk of statuses at a time.
func TestHostsAllStreamed(t *testing.T) {
	for _, n := range []int{0, 1, streamChunk, 2*streamChunk + 7} {
		c := &statusCounter{}
		for i := range n {
			c.manyHosts = append(c.manyHosts, deliver.HostStatus{Host: fmt.Sprintf("p%04d.example", n-1-i),
				Queued: int64(i), LastError: "<b> & \"quoted\"", Paused: i%2 == 0})
		}
		sp := emptySpool(t)
		h := Handler(Options{Hosts: c, Spool: sp, Journal: journalOf(sp)})
		r := httptest.NewRequest(http.MethodGet, "/v1/hosts?limit=0", nil)
		r.Host = "127.0.0.1"
		got := httptest.NewRecorder()
		h.ServeHTTP(got, r)

		all := append([]deliver.HostStatus{}, c.manyHosts...) // "hosts": [] when there are none
		slices.Reverse(all)
		want := httptest.NewRecorder()
		writeJSON(want, http.StatusOK, HostPage{Hosts: all, Total: n})
		if got.Code != http.StatusOK || got.Body.String() != want.Body.String() {
			t.Fatalf("%d hosts: status %d, answer differs from one encoding:\n got %.400q\nwant %.400q", n, got.Code, got.Body, want.Body)
		}
		if ct := got.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
		if c.all != 0 || c.built != n || c.most > streamChunk {
			t.Errorf("%d hosts: built %d statuses, at most %d at once (Hosts called %d times), want %d, at most %d, 0",
				n, c.built, c.most, c.all, n, streamChunk)
		}
	}
}
