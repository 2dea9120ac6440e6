package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Message looks a webhook up in the journal (GET /v1/messages/{id}). For
// an id of another replica's spool, the error is a *NotHereError that
// says which replica to ask.
func (c *Client) Message(ctx context.Context, id string) (Message, error) {
	var out Message
	path := "/v1/messages/" + url.PathEscape(id)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return out, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return out, fmt.Errorf("admin API at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return out, err
	}
	if resp.StatusCode == http.StatusOK {
		return out, json.Unmarshal(b, &out)
	}
	var nh NotHere
	if json.Unmarshal(b, &nh) == nil && nh.Elsewhere != nil {
		return out, &NotHereError{NotHere: nh}
	}
	if nh.Error != "" {
		return out, fmt.Errorf("GET %s: %s", path, nh.Error)
	}
	return out, fmt.Errorf("GET %s: %s", path, resp.Status)
}

// NotHereError is Message's error for a webhook of another replica's
// spool: NotHere says which replica that is, and its admin API.
type NotHereError struct{ NotHere NotHere }

func (e *NotHereError) Error() string { return e.NotHere.Error }

// MessageFilter selects webhooks for Messages; zero fields select all.
type MessageFilter struct {
	Host, State, Since, Until, Cursor string
	Limit                             int
	// Idempotency and Contains search (GET /v1/messages?idempotency_key=
	// and contains=).
	Idempotency, Contains string
}

// Messages lists webhooks from the journal, newest first.
func (c *Client) Messages(ctx context.Context, f MessageFilter) (MessageList, error) {
	q := url.Values{}
	for k, v := range map[string]string{"host": f.Host, "state": f.State, "since": f.Since, "until": f.Until, "cursor": f.Cursor,
		"idempotency_key": f.Idempotency, "contains": f.Contains} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out MessageList
	err := c.do(ctx, http.MethodGet, "/v1/messages", q, &out)
	return out, err
}

// Queue lists host's queue, oldest first.
func (c *Client) Queue(ctx context.Context, host string, limit int) (QueueList, error) {
	q := url.Values{"host": {host}, "limit": {strconv.Itoa(limit)}}
	var out QueueList
	err := c.do(ctx, http.MethodGet, "/v1/queue", q, &out)
	return out, err
}

// QueueAction purges (or buries) host's queued webhooks: those older than
// olderThan if it is set, these ids if any; by says who asks.
func (c *Client) QueueAction(ctx context.Context, bury bool, host string, olderThan time.Duration, ids []string, by string) (done, inFlight int, err error) {
	q := url.Values{"host": {host}, "id": ids}
	if olderThan > 0 {
		q.Set("older_than", olderThan.String())
	}
	if by != "" {
		q.Set("by", by)
	}
	path, verb := "/v1/queue/purge", "purged"
	if bury {
		path, verb = "/v1/queue/bury", "buried"
	}
	var out map[string]any
	if err = c.do(ctx, http.MethodPost, path, q, &out); err != nil {
		return 0, 0, err
	}
	n, _ := out[verb].(float64)
	f, _ := out["in_flight"].(float64)
	return int(n), int(f), nil
}

// At is a client for another hookpace's admin API at addr, with c's token
// (a fleet's replicas share it).
func (c *Client) At(addr string) *Client {
	return NewClient(addr).WithToken(c.token)
}
