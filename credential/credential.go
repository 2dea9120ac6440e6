// Package credential attaches a partner's credentials to each delivery
// attempt: a client certificate (mTLS), an OAuth2
// client-credentials token, and static secret headers. Secrets are read
// from files (re-read when the file changes, as when the kubelet swaps a
// Secret's symlink) or environment variables, at the moment of each
// attempt, and never stored: a webhook that waited in the spool for an
// hour goes with a token that is valid now.
package credential

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// Credentials are one host's. They are safe for concurrent use.
type Credentials struct {
	kinds   []string
	keep    bool
	headers []header
	cert    *certFiles   // nil without mtls
	client  *http.Client // presents cert; nil without mtls
	token   *tokenSource // nil without oauth2
	tokens  recentTokens // the latest tokens Apply set, for Scrub
}

type header struct {
	name  string
	value *secret
}

// Clients build the HTTP clients credentials need, with the egress
// policy and TLS verification of every other delivery and no proxy from
// the environment: Delivery for the partner (with a client certificate
// when getCert is set), Token for the token endpoint.
type Clients struct {
	Delivery func(getCert func(*tls.CertificateRequestInfo) (*tls.Certificate, error)) *http.Client
	Token    *http.Client
}

// Error is a problem with a secret or a certificate, naming the config
// field that points at it.
type Error struct {
	Field string
	Line  int
	Err   error
}

func (e *Error) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Options are one host's credentials as the config names them; Field and
// Line, where given, say where (an Error carries them).
type Options struct {
	MTLS           *MTLS   // nil: no client certificate
	OAuth2         *OAuth2 // nil: no token
	Headers        []Header
	KeepAppHeaders bool // what the app sent under the same names stays
}

// MTLS is the client certificate presented to the host, from PEM files.
type MTLS struct {
	CertFile, KeyFile string
	Field             string
	Line              int
}

// OAuth2 is a client-credentials grant whose access token goes with each
// attempt as Authorization: Bearer.
type OAuth2 struct {
	TokenURL     string
	ClientID     string
	ClientSecret Secret
	Scopes       []string
	Audience     string            // sent as the audience parameter when set
	Params       map[string]string // further token request parameters
}

// Header is a header whose value is a secret, set on each attempt.
type Header struct {
	Name  string // canonical
	Value Secret
}

// Secret names where a secret is read: a file (re-read when it changes)
// or, with Env, an environment variable (read once).
type Secret struct {
	Env   bool
	Name  string // the file's path or the variable's name
	Field string
	Line  int
}

// New reads every file and variable a names now, so that a start, a
// reload and check-config fail on a missing one with its field. The
// credentials send nothing until Bind gives them their clients.
func New(a Options) (*Credentials, error) {
	cr := &Credentials{keep: a.KeepAppHeaders}
	var errs []error
	if m := a.MTLS; m != nil {
		cr.kinds = append(cr.kinds, "mtls")
		cr.cert = &certFiles{certFile: m.CertFile, keyFile: m.KeyFile}
		if _, err := cr.cert.load(); err != nil {
			errs = append(errs, &Error{Field: m.Field, Line: m.Line, Err: err})
		}
	}
	if o := a.OAuth2; o != nil {
		cr.kinds = append(cr.kinds, "oauth2")
		s, err := newSecret(o.ClientSecret)
		if err != nil {
			errs = append(errs, err)
		}
		cr.token = newTokenSource(o, s, nil, time.Now)
	}
	for _, h := range a.Headers {
		s, err := newSecret(h.Value)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cr.headers = append(cr.headers, header{name: h.Name, value: s})
	}
	if len(a.Headers) > 0 {
		cr.kinds = append(cr.kinds, "headers")
	}
	return cr, errors.Join(errs...)
}

// Bind gives the credentials the clients they send with (a start or a
// reload does, once, before any attempt).
func (c *Credentials) Bind(cl Clients) {
	if c.cert != nil {
		c.client = cl.Delivery(c.cert.get)
	}
	if c.token != nil {
		c.token.client = cl.Token
	}
}

// Client is the client that presents the host's certificate, or nil (also
// for nil Credentials).
func (c *Credentials) Client() *http.Client {
	if c == nil {
		return nil
	}
	return c.client
}

// Apply sets the host's secret headers and its bearer token on h, over
// what the app sent unless keep_app_headers. An error means no token could
// be had (the token endpoint failed): the attempt must not go.
func (c *Credentials) Apply(ctx context.Context, h http.Header) error {
	set := func(name, value string) {
		if c.keep && h.Get(name) != "" {
			return
		}
		h.Set(name, value)
	}
	for _, hd := range c.headers {
		v, err := hd.value.get()
		if err != nil {
			return fmt.Errorf("auth: %s: %w", hd.name, err)
		}
		set(hd.name, v)
	}
	if c.token != nil && !(c.keep && h.Get("Authorization") != "") {
		tok, err := c.token.get(ctx)
		if err != nil {
			return err
		}
		c.tokens.add(tok)
		h.Set("Authorization", "Bearer "+tok)
	}
	return nil
}

// Rejected is what a 401 from the partner means: the token is dropped.
// sent is the attempt's header before Apply. It reports whether the 401
// was to the host's token (not to the app's own Authorization, kept by
// keep_app_headers), so that one retry with a new token may succeed.
func (c *Credentials) Rejected(sent http.Header) bool {
	if c == nil || c.token == nil || c.keep && sent.Get("Authorization") != "" {
		return false
	}
	c.token.invalidate()
	return true
}

// Status is what the status page and /v1/hosts show of a host's
// credentials: never a secret.
type Status struct {
	Kinds       string     `json:"kinds"` // "mtls", "oauth2", "headers", comma-separated
	TokenExpiry *time.Time `json:"token_expiry,omitempty"`
	TokenFetch  int64      `json:"token_fetches,omitempty"` // tokens fetched since the start
	LastError   string     `json:"last_error,omitempty"`    // the token endpoint's, or a file's
}

// Status says which credentials the host uses and how its token stands.
func (c *Credentials) Status() Status {
	st := Status{Kinds: strings.Join(c.kinds, ",")}
	if c.token != nil {
		st.TokenExpiry, st.TokenFetch, st.LastError = c.token.status()
	}
	if c.cert != nil {
		if err := c.cert.lastError(); err != nil && st.LastError == "" {
			st.LastError = "client certificate: " + err.Error()
		}
	}
	return st
}

// secret is a value from a file (re-read when the file changes) or an
// environment variable (read once).
type secret struct {
	path string

	mu    sync.Mutex
	stamp fileStamp
	value string
}

func newSecret(s Secret) (*secret, error) {
	if s.Env {
		v, ok := os.LookupEnv(s.Name)
		if !ok || v == "" {
			return nil, &Error{Field: s.Field, Line: s.Line, Err: fmt.Errorf("environment variable %s is not set", s.Name)}
		}
		return &secret{value: strings.TrimSpace(v)}, nil
	}
	sc := &secret{path: s.Name}
	if _, err := sc.get(); err != nil {
		return nil, &Error{Field: s.Field, Line: s.Line, Err: err}
	}
	return sc, nil
}

func (s *secret) get() (string, error) {
	if s.path == "" {
		return s.value, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := stampOf(s.path)
	if err != nil {
		if s.value != "" {
			return s.value, nil // gone for a moment (a swap): the last value stands
		}
		return "", err
	}
	if st == s.stamp {
		return s.value, nil
	}
	b, err := os.ReadFile(s.path)
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", fmt.Errorf("%s is empty", s.path)
	}
	s.stamp, s.value = st, v
	return v, nil
}

// fileStamp tells a changed file from the same one without reading it.
type fileStamp struct {
	mod  time.Time
	size int64
	ino  uint64
}

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path) // follows a kubelet ..data symlink to the file in force
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{mod: fi.ModTime(), size: fi.Size(), ino: inode(fi)}, nil
}

// certFiles is a client certificate and key, loaded again when either
// file changes, so that a rotated certificate is presented without a
// restart.
type certFiles struct {
	certFile, keyFile string

	mu     sync.Mutex
	stamps [2]fileStamp
	cert   *tls.Certificate
	err    error // of the last load that failed after one succeeded
}

func (c *certFiles) load() (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cs, err1 := stampOf(c.certFile)
	ks, err2 := stampOf(c.keyFile)
	if err := errors.Join(err1, err2); err != nil {
		if c.cert != nil {
			c.err = err
			return c.cert, nil
		}
		return nil, err
	}
	if c.cert != nil && [2]fileStamp{cs, ks} == c.stamps {
		return c.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		if c.cert != nil { // half-way through a rotation: the old pair stands
			c.err = err
			return c.cert, nil
		}
		return nil, err
	}
	c.cert, c.stamps, c.err = &cert, [2]fileStamp{cs, ks}, nil
	return c.cert, nil
}

func (c *certFiles) get(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return c.load() }

func (c *certFiles) lastError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}
