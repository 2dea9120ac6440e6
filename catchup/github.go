package catchup

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
)

// GitHub's REST API, version 2022-11-28: a webhook's deliveries
// (GET .../hooks/{hook_id}/deliveries for a repository's or an
// organisation's hook, GET /app/hook/deliveries for an App's), newest
// first, paged by the Link header's rel="next" (a cursor); a redelivery
// (POST .../deliveries/{delivery_id}/attempts, 202) is a new delivery
// with the same guid (X-GitHub-Delivery) and redelivery true, posted
// signed like the first.
const (
	GitHubAPIVersion = "2022-11-28"
	// MaxRedeliveries is how many redeliveries of one delivery catch-up
	// asks for; after that it says so and leaves it.
	MaxRedeliveries = 3
	githubPerPage   = 100
)

// delivery is one entry of a hook's deliveries.
type delivery struct {
	ID          int64     `json:"id"`
	GUID        string    `json:"guid"`
	DeliveredAt time.Time `json:"delivered_at"`
	Redelivery  bool      `json:"redelivery"`
	Status      string    `json:"status"`
	StatusCode  int       `json:"status_code"`
	Event       string    `json:"event"`
	Action      *string   `json:"action"`
}

func (d delivery) ok() bool { return d.StatusCode >= 200 && d.StatusCode < 300 }

type github struct {
	opts *Options
}

// hookURL is the hook's deliveries endpoint.
func (g *github) hookURL() string {
	c := g.opts.Config
	switch {
	case c.Repo != "":
		owner, name, _ := strings.Cut(c.Repo, "/")
		return c.APIURL + "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(name) + "/hooks/" + strconv.FormatInt(c.HookID, 10) + "/deliveries"
	case c.Org != "":
		return c.APIURL + "/orgs/" + url.PathEscape(c.Org) + "/hooks/" + strconv.FormatInt(c.HookID, 10) + "/deliveries"
	}
	return c.APIURL + "/app/hook/deliveries"
}

// authorization is the Authorization header's value: the token's, or a
// JWT the App's key signs.
func (g *github) authorization(now time.Time) (string, error) {
	c := g.opts.Config
	if c.AppID != 0 {
		jwt, err := appJWT(c.AppID, c.PrivateKeyFile, now)
		if err != nil {
			return "", err
		}
		return "Bearer " + jwt, nil
	}
	tok, err := readSecret("token_file", c.TokenFile)
	if err != nil {
		return "", err
	}
	return "Bearer " + tok, nil
}

// round lists the hook's deliveries of the last Since, and for each
// guid whose every attempt failed and that the route has not taken,
// asks for a redelivery of its latest attempt, up to MaxRedeliveries.
func (g *github) round(ctx context.Context, now time.Time) (Round, error) {
	var res Round
	auth, err := g.authorization(now)
	if err != nil {
		return res, err
	}
	ds, err := g.list(ctx, auth, now.Add(-g.opts.Config.Since.D()))
	if err != nil {
		return res, err
	}
	res.Listed = len(ds)
	type guid struct {
		latest      delivery
		ok          bool
		redelivered int
	}
	byGUID := map[string]*guid{}
	var order []string // oldest first: redeliveries go in the order GitHub first sent them
	for i := len(ds) - 1; i >= 0; i-- {
		d := ds[i]
		if d.GUID == "" {
			continue
		}
		e := byGUID[d.GUID]
		if e == nil {
			e = &guid{}
			byGUID[d.GUID] = e
			order = append(order, d.GUID)
		}
		e.ok = e.ok || d.ok()
		if d.Redelivery {
			e.redelivered++
		}
		if d.ID > e.latest.ID {
			e.latest = d
		}
	}
	for _, id := range order {
		e := byGUID[id]
		if e.ok {
			continue
		}
		res.Failed++
		switch {
		case g.opts.Door.Seen(id):
			res.Seen++ // GitHub gave up waiting, but the door took it
		case e.redelivered >= MaxRedeliveries:
			res.GaveUp++
			g.opts.Logger.Warn("catch_up gave up", "route", g.opts.Route, "provider", "github", "delivery", id,
				"event", e.latest.Event, "redeliveries", e.redelivered, "last_status", e.latest.StatusCode)
		default:
			if err := g.redeliver(ctx, auth, e.latest.ID); err != nil {
				return res, fmt.Errorf("redeliver %s (delivery %d): %w", id, e.latest.ID, err)
			}
			res.Redelivered++
		}
	}
	return res, nil
}

// list reads the hook's deliveries, newest first, page after page until
// one reaches back before since.
func (g *github) list(ctx context.Context, auth string, since time.Time) ([]delivery, error) {
	base, err := url.Parse(g.opts.Config.APIURL)
	if err != nil {
		return nil, err
	}
	next := g.hookURL() + "?per_page=" + strconv.Itoa(githubPerPage)
	var out []delivery
	for pages := 0; next != ""; pages++ {
		if pages == 1000 {
			return nil, fmt.Errorf("more than %d pages of deliveries", pages)
		}
		var page []delivery
		resp, err := g.do(ctx, http.MethodGet, next, auth, &page)
		if err != nil {
			return nil, err
		}
		older := false
		for _, d := range page {
			if d.DeliveredAt.Before(since) {
				older = true
				continue
			}
			out = append(out, d)
		}
		if older {
			break
		}
		next = linkNext(resp.Header)
		// The token goes only to the API it was configured for.
		if u, err := url.Parse(next); next != "" && (err != nil || u.Scheme != base.Scheme || u.Host != base.Host) {
			return nil, fmt.Errorf("the Link header's next page %q is not on %s", next, g.opts.Config.APIURL)
		}
	}
	return out, nil
}

// redeliver asks GitHub to send delivery id again.
func (g *github) redeliver(ctx context.Context, auth string, id int64) error {
	_, err := g.do(ctx, http.MethodPost, g.hookURL()+"/"+strconv.FormatInt(id, 10)+"/attempts", auth, nil)
	return err
}

// do sends one API request and decodes a 2xx answer's JSON into out (nil:
// the body is read and dropped); anything else is an *apiError.
func (g *github) do(ctx context.Context, method, u, auth string, out any) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", GitHubAPIVersion)
	req.Header.Set("User-Agent", "hookpace-catch-up")
	req.Header.Set("Authorization", auth)
	resp, err := g.opts.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer drain(resp.Body)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, githubError(resp)
	}
	if out != nil {
		if err := json.NewDecoder(io.LimitReader(resp.Body, 32<<20)).Decode(out); err != nil {
			return nil, fmt.Errorf("%s %s: decoding the answer: %w", method, req.URL.Path, err)
		}
	}
	return resp, nil
}

// githubError is a refusal's status and GitHub's message, with when to
// retry: Retry-After, or X-RateLimit-Reset once the limit is spent.
func githubError(resp *http.Response) error {
	var body struct {
		Message string `json:"message"`
	}
	json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body)
	e := &apiError{Status: resp.StatusCode, Message: body.Message, Retry: resp.Header.Get("Retry-After")}
	if e.Retry == "" && resp.Header.Get("X-RateLimit-Remaining") == "0" {
		if s, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			e.Retry = time.Unix(s, 0).UTC().Format(time.RFC3339)
		}
	}
	return e
}

// linkNext is the Link header's rel="next" URL; "" when there is none.
func linkNext(h http.Header) string {
	for _, v := range h.Values("Link") {
		for _, part := range strings.Split(v, ",") {
			target, params, ok := strings.Cut(strings.TrimSpace(part), ";")
			if !ok || !strings.HasPrefix(target, "<") || !strings.HasSuffix(target, ">") {
				continue
			}
			for _, p := range strings.Split(params, ";") {
				k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
				if strings.TrimSpace(k) == "rel" && strings.Trim(strings.TrimSpace(val), `"`) == "next" {
					return target[1 : len(target)-1]
				}
			}
		}
	}
	return ""
}
