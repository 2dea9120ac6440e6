package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hookpace/hookpace/deliver"
)

// Client talks to a running hookpace's admin API.
type Client struct {
	base  string
	http  *http.Client
	token string
}

// WithToken makes c send the admin bearer token with every request.
func (c *Client) WithToken(token string) *Client {
	c.token = token
	return c
}

// NewClient returns a client for the admin listener at addr ("host:port"
// or a URL). It never goes through a proxy from the environment: the admin
// API is local.
func NewClient(addr string) *Client {
	base := addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	return &Client{
		base: strings.TrimRight(base, "/"),
		http: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil}},
	}
}

func (c *Client) do(ctx context.Context, method, path string, q url.Values, out any) error {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return err
	}
	// The header a web form cannot send: the API refuses state-changing
	// requests without it (see Guard).
	req.Header.Set(Header, "1")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("admin API at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var e struct{ Error string }
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return fmt.Errorf("%s %s: %s", method, path, e.Error)
		}
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

// Hosts lists every host hookpace knows.
func (c *Client) Hosts(ctx context.Context) ([]deliver.HostStatus, error) {
	hosts, _, err := c.HostsFleet(ctx)
	return hosts, err
}

// HostsFleet lists every host hookpace knows, and the fleet's state (nil
// without a fleet).
func (c *Client) HostsFleet(ctx context.Context) ([]deliver.HostStatus, *deliver.FleetStatus, error) {
	return c.HostsMatching(ctx, "")
}

// HostsMatching lists the hosts whose name contains filter (any case; ""
// for all), a page at a time, and the fleet's state (nil without one).
func (c *Client) HostsMatching(ctx context.Context, filter string) ([]deliver.HostStatus, *deliver.FleetStatus, error) {
	var all []deliver.HostStatus
	q := HostQuery{Host: filter, Limit: DefaultHostsLimit}
	for {
		page, err := c.HostPage(ctx, q)
		if err != nil {
			return nil, nil, err
		}
		all = append(all, page.Hosts...)
		if page.NextCursor == "" || page.NextCursor == q.Cursor {
			return all, page.Fleet, nil
		}
		q.Cursor = page.NextCursor
	}
}

// HostPage asks for one page of GET /v1/hosts.
func (c *Client) HostPage(ctx context.Context, q HostQuery) (HostPage, error) {
	v := url.Values{"limit": {strconv.Itoa(q.Limit)}}
	if q.Host != "" {
		v.Set("host", q.Host)
	}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	var page HostPage
	err := c.do(ctx, http.MethodGet, "/v1/hosts?"+v.Encode(), nil, &page)
	return page, err
}

// Pause stops sending to host; Resume undoes it.
func (c *Client) Pause(ctx context.Context, host string) (deliver.HostStatus, error) {
	var out deliver.HostStatus
	err := c.do(ctx, http.MethodPost, "/v1/hosts/"+url.PathEscape(host)+"/pause", nil, &out)
	return out, err
}

// Resume lets host send again.
func (c *Client) Resume(ctx context.Context, host string) (deliver.HostStatus, error) {
	var out deliver.HostStatus
	err := c.do(ctx, http.MethodPost, "/v1/hosts/"+url.PathEscape(host)+"/resume", nil, &out)
	return out, err
}

// Spool reports the spool's usage and admission state, and its
// replication.
func (c *Client) Spool(ctx context.Context) (SpoolView, error) {
	var out SpoolView
	err := c.do(ctx, http.MethodGet, "/v1/spool", nil, &out)
	return out, err
}

// Selector picks dead letters: All, or a Host, or IDs.
type Selector struct {
	All  bool
	Host string
	IDs  []string
	// Since and Until bound when dead letters died: an RFC 3339 time or a
	// duration ago ("1h").
	Since, Until string
}

func (s Selector) query() url.Values {
	q := url.Values{}
	if s.All {
		q.Set("all", "1")
	}
	if s.Host != "" {
		q.Set("host", s.Host)
	}
	for _, id := range s.IDs {
		q.Add("id", id)
	}
	if s.Since != "" {
		q.Set("since", s.Since)
	}
	if s.Until != "" {
		q.Set("until", s.Until)
	}
	return q
}

// Dead lists dead letters (up to limit; 0 for all).
func (c *Client) Dead(ctx context.Context, s Selector, limit int) (DeadList, error) {
	q := s.query()
	q.Del("all")
	q.Set("limit", strconv.Itoa(limit))
	var out DeadList
	err := c.do(ctx, http.MethodGet, "/v1/dead", q, &out)
	return out, err
}

// ExportDead returns every dead letter matching s with its headers and
// body.
func (c *Client) ExportDead(ctx context.Context, s Selector) (DeadList, error) {
	q := s.query()
	q.Del("all")
	q.Set("limit", "0")
	q.Set("body", "1")
	q.Set("whole", "1") // URLs and headers unredacted
	var out DeadList
	err := c.do(ctx, http.MethodGet, "/v1/dead", q, &out)
	return out, err
}

// PurgeDead deletes dead letters for good.
func (c *Client) PurgeDead(ctx context.Context, s Selector) (int, error) {
	var out map[string]int
	err := c.do(ctx, http.MethodPost, "/v1/dead/purge", s.query(), &out)
	return out["purged"], err
}

// Health checks /healthz (ready: /readyz).
func (c *Client) Health(ctx context.Context, ready bool) error {
	path := "/healthz"
	if ready {
		path = "/readyz"
	}
	return c.do(ctx, http.MethodGet, path, nil, nil)
}
