package credential

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// maxEarly is how long before its expiry a token is replaced at most;
// a short-lived token is replaced a quarter of its lifetime early instead,
// so that a 2-second token is not fetched again for every attempt (the
// oauth2 package's own reuse replaces any token 10 s early).
const maxEarly = 10 * time.Second

// tokenSource fetches client-credentials tokens and keeps the current one
// until shortly before it expires. One fetch at a time, made outside the
// lock: attempts that need a token while one is being fetched wait for
// that fetch (or their own context), and readers of the state (status)
// never wait for a fetch.
type tokenSource struct {
	cfg    clientcredentials.Config
	secret *secret
	client *http.Client
	now    func() time.Time

	mu       sync.Mutex
	tok      string
	expiry   time.Time // zero: none given, kept until a 401
	early    time.Duration
	fetches  int64
	lastErr  string
	fetching *fetch // the fetch under way; nil: none
}

// fetch is one request to the token endpoint, shared by every attempt
// that asked for a token while it ran; tok and err are set before done is
// closed.
type fetch struct {
	done chan struct{}
	tok  string
	err  error
}

func newTokenSource(o *OAuth2, s *secret, client *http.Client, now func() time.Time) *tokenSource {
	params := url.Values{}
	for k, v := range o.Params {
		params.Set(k, v)
	}
	if o.Audience != "" {
		params.Set("audience", o.Audience)
	}
	return &tokenSource{
		cfg: clientcredentials.Config{ClientID: o.ClientID, TokenURL: o.TokenURL, Scopes: o.Scopes,
			EndpointParams: params, AuthStyle: oauth2.AuthStyleAutoDetect},
		secret: s, client: client, now: now,
	}
}

// get returns a token valid now, fetching one when there is none or it
// is about to expire. The first caller to find none makes the fetch; the
// others wait for it, each at most until its own ctx is done.
func (t *tokenSource) get(ctx context.Context) (string, error) {
	t.mu.Lock()
	if t.tok != "" && (t.expiry.IsZero() || t.now().Before(t.expiry.Add(-t.early))) {
		tok := t.tok
		t.mu.Unlock()
		return tok, nil
	}
	f := t.fetching
	if f == nil {
		f = &fetch{done: make(chan struct{})}
		t.fetching = f
		t.mu.Unlock()
		f.tok, f.err = t.fetch(ctx)
		t.mu.Lock()
		t.fetching = nil
		t.mu.Unlock()
		close(f.done)
		return f.tok, f.err
	}
	t.mu.Unlock()
	select {
	case <-f.done:
		return f.tok, f.err
	case <-ctx.Done():
		return "", fmt.Errorf("auth: waiting for the token endpoint: %w", ctx.Err())
	}
}

// fetch asks the token endpoint for a token, off the lock, and records
// the outcome.
func (t *tokenSource) fetch(ctx context.Context) (string, error) {
	if t.secret == nil {
		return "", errors.New("auth: no client secret")
	}
	cs, err := t.secret.get()
	if err != nil {
		t.mu.Lock()
		t.lastErr = "client secret: " + err.Error()
		t.mu.Unlock()
		return "", fmt.Errorf("auth: client secret: %w", err)
	}
	cfg := t.cfg
	cfg.ClientSecret = cs
	fetched := t.now()
	tok, err := cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, t.client))
	if err == nil && expiredOnArrival(tok, fetched) {
		err = fmt.Errorf("issued a token that had expired on arrival (expires_in %v)", tok.Extra("expires_in"))
	}
	if err != nil {
		why := describe(err, clientForms(t.cfg.ClientID, cs))
		t.failed(why)
		return "", fmt.Errorf("auth: token endpoint: %s", why)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.fetches++
	t.tok, t.expiry, t.lastErr = tok.AccessToken, tok.Expiry, ""
	t.early = 0
	if !tok.Expiry.IsZero() {
		t.early = min(maxEarly, tok.Expiry.Sub(fetched)/4)
	}
	return t.tok, nil
}

// failed records a fetch that got no token.
func (t *tokenSource) failed(why string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.fetches++
	t.lastErr = why
}

// expiredOnArrival reports whether tok could not be used at all: an
// expires_in of 0 or less (the oauth2 package reads 0 as "no expiry
// given", and a negative one as an expiry in the past), or an expiry not
// after the moment it was asked for.
func expiredOnArrival(tok *oauth2.Token, asked time.Time) bool {
	if !tok.Expiry.IsZero() && !tok.Expiry.After(asked) {
		return true
	}
	var secs float64
	switch v := tok.Extra("expires_in").(type) {
	case float64:
		secs = v
	case string:
		n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return false
		}
		secs = n
	default:
		return false
	}
	return secs <= 0
}

// invalidate drops the token (the partner refused it).
func (t *tokenSource) invalidate() {
	t.mu.Lock()
	t.tok = ""
	t.mu.Unlock()
}

func (t *tokenSource) status() (*time.Time, int64, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var exp *time.Time
	if t.tok != "" && !t.expiry.IsZero() {
		e := t.expiry.UTC()
		exp = &e
	}
	return exp, t.fetches, t.lastErr
}

// describe says what the token endpoint answered, briefly: its status and
// the start of its body (an error code and description, by RFC 6749), the
// client secret's forms scrubbed from it (an endpoint may echo its request).
func describe(err error, secret []string) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil {
		body := scrub(strings.TrimSpace(string(re.Body)), secret)
		if len(body) > 200 {
			body = body[:200] + "..."
		}
		return fmt.Sprintf("%s: %s", re.Response.Status, body)
	}
	return scrub(err.Error(), secret)
}
