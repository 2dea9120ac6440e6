package catchup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/inbound"
)

// Stripe's API: List all events (GET /v1/events), newest first, at
// most limit (1 to 100) a page; ending_before=ID gives the page of events
// just newer than ID, starting_after=ID the page just older; has_more
// says whether there are more that way; created[gte] and types[] (at
// most 20) narrow it. Events are kept 30 days. An event listed is the
// object a webhook's body is.
const stripeLimit = 100

// stripeSettle bounds how long an event is left to Stripe's own delivery
// before catch-up fetches it: an event younger than min(Every,
// stripeSettle) waits for a later round.
const stripeSettle = 5 * time.Minute

type stripe struct {
	opts  *Options
	state *state
}

// stripeEvent is what catch-up reads of an event; the event's whole
// JSON is what the route takes in.
type stripeEvent struct {
	ID      string `json:"id"`
	Created int64  `json:"created"`
}

type stripePage struct {
	Data    []json.RawMessage `json:"data"`
	HasMore bool              `json:"has_more"`
}

// round takes in the events since the cursor (the newest event taken
// in; kept in the state file once the events before it are durable), or,
// without one, those of the last Since. An event the route has seen is
// skipped; one younger than the settle time is left for a later round,
// and the cursor stays before it.
func (s *stripe) round(ctx context.Context, now time.Time) (Round, error) {
	var res Round
	key, err := readSecret("api_key_file", s.opts.Config.APIKeyFile)
	if err != nil {
		return res, err
	}
	settled := now.Add(-min(s.opts.Config.Every.D(), stripeSettle))
	cur, err := s.state.load(s.opts.Config)
	if err != nil {
		return res, err
	}
	if cur != "" {
		err = s.forward(ctx, key, cur, settled, &res)
		var ae *apiError
		if !errors.As(err, &ae) || ae.Code != "resource_missing" {
			return res, err
		}
		// The cursor's event is gone (older than Stripe keeps): start
		// again from Since.
		s.opts.Logger.Warn("catch_up cursor gone", "route", s.opts.Route, "provider", "stripe", "cursor", cur)
		if err := s.state.save(s.opts.Config, ""); err != nil {
			return res, err
		}
	}
	return res, s.backfill(ctx, key, now.Add(-s.opts.Config.Since.D()), settled, &res)
}

// forward takes in the events newer than cur, oldest first, moving the
// cursor past each once it is durable.
func (s *stripe) forward(ctx context.Context, key, cur string, settled time.Time, res *Round) error {
	for {
		q := s.query()
		q.Set("ending_before", cur)
		page, err := s.list(ctx, key, q)
		if err != nil {
			return err
		}
		for i := len(page.Data) - 1; i >= 0; i-- {
			ev, err := parseEvent(page.Data[i])
			if err != nil {
				return errors.Join(err, s.state.save(s.opts.Config, cur))
			}
			res.Listed++
			if time.Unix(ev.Created, 0).After(settled) {
				res.Later += i + 1
				return s.state.save(s.opts.Config, cur)
			}
			if err := s.take(ctx, ev, page.Data[i], res); err != nil {
				return errors.Join(err, s.state.save(s.opts.Config, cur))
			}
			cur = ev.ID
		}
		if err := s.state.save(s.opts.Config, cur); err != nil {
			return err
		}
		if !page.HasMore || len(page.Data) == 0 {
			return nil
		}
	}
}

// backfill takes in the events created since from, newest first, and
// then keeps the newest settled one as the cursor: a round that fails
// part way keeps none, and the next walks the window again (what was
// taken is seen, and skipped).
func (s *stripe) backfill(ctx context.Context, key string, from, settled time.Time, res *Round) error {
	newest, after := "", ""
	for {
		q := s.query()
		q.Set("created[gte]", strconv.FormatInt(from.Unix(), 10))
		if after != "" {
			q.Set("starting_after", after)
		}
		page, err := s.list(ctx, key, q)
		if err != nil {
			return err
		}
		for _, raw := range page.Data {
			ev, err := parseEvent(raw)
			if err != nil {
				return err
			}
			res.Listed++
			after = ev.ID
			if time.Unix(ev.Created, 0).After(settled) {
				res.Later++
				continue
			}
			if err := s.take(ctx, ev, raw, res); err != nil {
				return err
			}
			if newest == "" {
				newest = ev.ID
			}
		}
		if !page.HasMore || len(page.Data) == 0 {
			break
		}
	}
	if newest == "" {
		return nil
	}
	return s.state.save(s.opts.Config, newest)
}

// take gets one event to the route, unless the route has it.
func (s *stripe) take(ctx context.Context, ev stripeEvent, raw json.RawMessage, res *Round) error {
	if s.opts.Door.Seen(ev.ID) {
		res.Seen++
		return nil
	}
	how, err := s.opts.Door.TakeFetched(ctx, config.CatchUpStripe, s.opts.Config.Path, raw)
	if err != nil {
		return fmt.Errorf("event %s: %w", ev.ID, err)
	}
	switch how {
	case inbound.FetchedStored:
		res.Fetched++
	case inbound.FetchedDuplicate:
		res.Duplicates++
	case inbound.FetchedFiltered:
		res.Filtered++
	}
	return nil
}

func (s *stripe) query() url.Values {
	q := url.Values{"limit": {strconv.Itoa(stripeLimit)}}
	for _, t := range s.opts.Config.Types {
		q.Add("types[]", t)
	}
	return q
}

func parseEvent(raw json.RawMessage) (stripeEvent, error) {
	var ev stripeEvent
	if err := json.Unmarshal(raw, &ev); err != nil || ev.ID == "" {
		return ev, fmt.Errorf("an event without an id in the list: %.80s", raw)
	}
	return ev, nil
}

// list reads one page of events.
func (s *stripe) list(ctx context.Context, key string, q url.Values) (*stripePage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.opts.Config.APIURL+"/v1/events?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("User-Agent", "hookpace-catch-up")
	resp, err := s.opts.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer drain(resp.Body)
	body := io.LimitReader(resp.Body, 64<<20)
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		json.NewDecoder(body).Decode(&e)
		return nil, &apiError{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message, Retry: resp.Header.Get("Retry-After")}
	}
	var page stripePage
	if err := json.NewDecoder(body).Decode(&page); err != nil {
		return nil, fmt.Errorf("GET /v1/events: decoding the answer: %w", err)
	}
	return &page, nil
}
