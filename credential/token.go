package credential

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
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
// until shortly before it expires. One fetch at a time: attempts that need
// a token while one is being fetched wait for it.
type tokenSource struct {
	cfg    clientcredentials.Config
	secret *secret
	client *http.Client
	now    func() time.Time

	mu      sync.Mutex
	tok     string
	expiry  time.Time // zero: none given, kept until a 401
	early   time.Duration
	fetches int64
	lastErr string
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
// is about to expire.
func (t *tokenSource) get(ctx context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tok != "" && (t.expiry.IsZero() || t.now().Before(t.expiry.Add(-t.early))) {
		return t.tok, nil
	}
	if t.secret == nil {
		return "", errors.New("auth: no client secret")
	}
	cs, err := t.secret.get()
	if err != nil {
		t.lastErr = "client secret: " + err.Error()
		return "", fmt.Errorf("auth: client secret: %w", err)
	}
	cfg := t.cfg
	cfg.ClientSecret = cs
	fetched := t.now()
	tok, err := cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, t.client))
	t.fetches++
	if err != nil {
		t.lastErr = describe(err, clientForms(t.cfg.ClientID, cs))
		return "", fmt.Errorf("auth: token endpoint: %s", t.lastErr)
	}
	t.tok, t.expiry, t.lastErr = tok.AccessToken, tok.Expiry, ""
	t.early = 0
	if !tok.Expiry.IsZero() {
		t.early = min(maxEarly, tok.Expiry.Sub(fetched)/4)
	}
	return t.tok, nil
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
