// Package sign signs webhook deliveries at each attempt, so that receivers
// can verify that a request came from hookpace unchanged: the Standard
// Webhooks scheme (webhook-id, webhook-timestamp, webhook-signature, HMAC-SHA256
// over "id.timestamp.body", or its v1a: Ed25519 over the same bytes), or a
// plain HMAC-SHA256 of the body in one header ("sha256=<hex>").
//
// A nil *Signer signs nothing; the dispatcher checks for nil and does no
// other work for hosts without signing.
package sign

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Schemes.
const (
	StandardWebhooks = "standard-webhooks"
	// StandardWebhooksV1a is Standard Webhooks' asymmetric scheme:
	// "v1a,<base64 Ed25519(key, id.timestamp.body)>", verified with a
	// public key ("whpk_…") rather than a shared secret.
	StandardWebhooksV1a = "standard-webhooks-v1a"
	HMACSHA256          = "hmac-sha256"
)

// The Standard Webhooks headers, as the spec writes them (HTTP header names
// are case-insensitive; Go sends them canonicalised, Webhook-Id).
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// MaxSecrets is how many secrets may sign at once (rotation).
const MaxSecrets = 2

// Options configure a Signer.
type Options struct {
	Scheme  string   // StandardWebhooks or HMACSHA256
	Secrets [][]byte // keys: for StandardWebhooks decoded from whsec_…; 1 to MaxSecrets
	// Keys sign StandardWebhooksV1a, 1 to MaxSecrets (rotation: both
	// sign). Secrets, if any, add v1 signatures beside them (a migration
	// from v1 to v1a: the receiver accepts either).
	Keys []ed25519.PrivateKey
	// PerHost signs each destination host with a key of its own, derived
	// from Keys (HostKey), so that what one partner received verifies
	// at no other; off, Keys sign for every host alike.
	PerHost bool
	Header  string // HMACSHA256: the header that carries "sha256=<hex>"
	// Replace overwrites signature headers the app sent; otherwise a
	// request that already carries one is passed through unsigned.
	Replace bool
	// Prefix goes before each Standard Webhooks header name
	// ("Hookpace-" sends Hookpace-Webhook-Id and so on), so that a
	// signature of hookpace's travels beside a provider's own.
	Prefix string
}

// Signer signs requests for the hosts of one sign block. It is safe for
// concurrent use.
type Signer struct {
	opts  Options
	hosts *hostKeys // PerHost: each host's keys
}

// New checks opts and returns a Signer.
func New(opts Options) (*Signer, error) {
	switch opts.Scheme {
	case StandardWebhooksV1a:
		if len(opts.Keys) < 1 || len(opts.Keys) > MaxSecrets {
			return nil, fmt.Errorf("want 1 or %d Ed25519 keys, got %d", MaxSecrets, len(opts.Keys))
		}
		for i, k := range opts.Keys {
			if len(k) != ed25519.PrivateKeySize {
				return nil, fmt.Errorf("key %d is %d bytes, not an Ed25519 private key", i+1, len(k))
			}
		}
		if len(opts.Secrets) > MaxSecrets {
			return nil, fmt.Errorf("want at most %d v1 secrets beside the keys, got %d", MaxSecrets, len(opts.Secrets))
		}
	case StandardWebhooks:
		if len(opts.Secrets) < 1 || len(opts.Secrets) > MaxSecrets {
			return nil, fmt.Errorf("want 1 or %d secrets, got %d", MaxSecrets, len(opts.Secrets))
		}
	case HMACSHA256:
		if len(opts.Secrets) != 1 {
			return nil, fmt.Errorf("%s takes one secret, got %d", HMACSHA256, len(opts.Secrets))
		}
		if opts.Header == "" {
			return nil, errors.New("hmac-sha256 needs a header name")
		}
	default:
		return nil, fmt.Errorf("unknown scheme %q", opts.Scheme)
	}
	for i, s := range opts.Secrets {
		if len(s) == 0 {
			return nil, fmt.Errorf("secret %d is empty", i+1)
		}
	}
	s := &Signer{opts: opts}
	if opts.PerHost && opts.Scheme == StandardWebhooksV1a {
		s.hosts = &hostKeys{masters: opts.Keys}
	}
	return s, nil
}

// Keys are the Ed25519 keys that sign for host (v1a), one a key in use
// (two during a rotation); none for the other schemes.
func (s *Signer) Keys(host string) []ed25519.PrivateKey {
	if s.hosts != nil {
		return s.hosts.of(host)
	}
	return s.opts.Keys
}

// Scheme returns the signer's scheme.
func (s *Signer) Scheme() string { return s.opts.Scheme }

// Sign adds the signature headers for a request to host with body, sent
// now, to h. id is hookpace's stable message id (the same on retries and
// replays). With Replace off, a request whose headers already carry a
// signature (webhook-signature, or the configured header) is left as it
// is.
func (s *Signer) Sign(h http.Header, host, id string, body []byte, now time.Time) {
	switch s.opts.Scheme {
	case StandardWebhooks, StandardWebhooksV1a:
		pre := s.opts.Prefix
		if !s.opts.Replace && has(h, pre+HeaderSignature) {
			return
		}
		ts := strconv.FormatInt(now.Unix(), 10)
		del(h, pre+HeaderID, pre+HeaderTimestamp, pre+HeaderSignature)
		h.Set(pre+HeaderID, id)
		h.Set(pre+HeaderTimestamp, ts)
		sig := Signatures(s.opts.Secrets, id, ts, body)
		if s.opts.Scheme == StandardWebhooksV1a {
			v1a := AsymmetricSignatures(s.Keys(host), id, ts, body)
			if sig != "" {
				v1a += " " + sig
			}
			sig = v1a
		}
		h.Set(pre+HeaderSignature, sig)
	case HMACSHA256:
		if !s.opts.Replace && has(h, s.opts.Header) {
			return
		}
		del(h, s.opts.Header)
		h.Set(s.opts.Header, BodySignature(s.opts.Secrets[0], body))
	}
}

// Signatures is the Standard Webhooks webhook-signature value: one
// "v1,<base64 HMAC-SHA256(key, id.timestamp.body)>" per key, space-separated.
func Signatures(keys [][]byte, id, timestamp string, body []byte) string {
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		mac := hmac.New(sha256.New, k)
		mac.Write([]byte(id))
		mac.Write([]byte{'.'})
		mac.Write([]byte(timestamp))
		mac.Write([]byte{'.'})
		mac.Write(body)
		b.WriteString("v1,")
		b.WriteString(base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	}
	return b.String()
}

// AsymmetricSignatures is the Standard Webhooks webhook-signature value
// of scheme v1a: one "v1a,<base64 Ed25519(key, id.timestamp.body)>" per
// key, space-separated.
func AsymmetricSignatures(keys []ed25519.PrivateKey, id, timestamp string, body []byte) string {
	msg := make([]byte, 0, len(id)+len(timestamp)+2+len(body))
	msg = append(msg, id...)
	msg = append(msg, '.')
	msg = append(msg, timestamp...)
	msg = append(msg, '.')
	msg = append(msg, body...)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("v1a,")
		b.WriteString(base64.StdEncoding.EncodeToString(ed25519.Sign(k, msg)))
	}
	return b.String()
}

// BodySignature is "sha256=<hex HMAC-SHA256(key, body)>".
func BodySignature(key, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// ParseSecret decodes a Standard Webhooks secret as the spec writes it:
// "whsec_" followed by the key in base64 (the prefix may be left out).
func ParseSecret(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	b64 := strings.TrimPrefix(s, "whsec_")
	if b64 == "" {
		return nil, errors.New("secret is empty")
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, errors.New(`secret is not "whsec_" followed by base64`)
	}
	if len(key) < 16 {
		return nil, fmt.Errorf("secret is %d bytes, want at least 16 (the spec asks for 24 to 64)", len(key))
	}
	return key, nil
}

// has reports whether h carries name, in any case.
func has(h http.Header, name string) bool {
	for k := range h {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

// del removes names from h, in any case.
func del(h http.Header, names ...string) {
	for k := range h {
		for _, n := range names {
			if strings.EqualFold(k, n) {
				delete(h, k)
			}
		}
	}
}
