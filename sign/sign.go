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
	"hash"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	// The header names as net/http keys them (canonical, Prefix
	// included), so that an attempt sets them without rewriting them.
	idKey, tsKey, sigKey string
	macs                 []sync.Pool // per secret: *keyedMAC
}

// keyedMAC is an HMAC-SHA256 state keyed once, reset after each use, and
// room for its sum.
type keyedMAC struct {
	hash.Hash
	sum [sha256.Size]byte
}

// mac computes HMAC-SHA256(secret i, msg); the sum is valid until the
// state is given back.
func (s *Signer) mac(i int, msg []byte) (*keyedMAC, []byte) {
	m := s.macs[i].Get().(*keyedMAC)
	m.Write(msg)
	return m, m.Sum(m.sum[:0])
}

func (s *Signer) doneMAC(i int, m *keyedMAC) {
	m.Reset()
	s.macs[i].Put(m)
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
	s := &Signer{opts: opts, macs: make([]sync.Pool, len(opts.Secrets))}
	for i, k := range opts.Secrets {
		s.macs[i].New = func() any { return &keyedMAC{Hash: hmac.New(sha256.New, k)} }
	}
	if opts.PerHost && opts.Scheme == StandardWebhooksV1a {
		s.hosts = &hostKeys{masters: opts.Keys}
	}
	if opts.Scheme == HMACSHA256 {
		s.sigKey = textproto.CanonicalMIMEHeaderKey(opts.Header)
	} else {
		s.idKey = textproto.CanonicalMIMEHeaderKey(opts.Prefix + HeaderID)
		s.tsKey = textproto.CanonicalMIMEHeaderKey(opts.Prefix + HeaderTimestamp)
		s.sigKey = textproto.CanonicalMIMEHeaderKey(opts.Prefix + HeaderSignature)
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
//
// The signing input is built once, in a buffer an attempt borrows and
// gives back, and every signature (Ed25519 and HMAC alike) reads it;
// the header's value is the only string made from the signatures.
func (s *Signer) Sign(h http.Header, host, id string, body []byte, now time.Time) {
	if !s.opts.Replace && has(h, s.sigKey) {
		return
	}
	buf := getBuf()
	defer putBuf(buf)
	switch s.opts.Scheme {
	case StandardWebhooks, StandardWebhooksV1a:
		msg := appendInput((*buf)[:0], id, now.Unix(), body)
		ts := string(msg[len(id)+1 : len(msg)-len(body)-1])
		sig := msg[len(msg):] // room made by appendInput
		if s.opts.Scheme == StandardWebhooksV1a {
			sig = appendV1a(sig, s.Keys(host), msg)
		}
		sig = s.appendV1(sig, msg)
		*buf = msg[:0]
		del(h, s.idKey, s.tsKey, s.sigKey)
		h[s.idKey] = []string{id}
		h[s.tsKey] = []string{ts}
		h[s.sigKey] = []string{string(sig)}
	case HMACSHA256:
		m, sum := s.mac(0, body)
		sig := append((*buf)[:0], "sha256="...)
		sig = hex.AppendEncode(sig, sum)
		s.doneMAC(0, m)
		*buf = sig[:0]
		del(h, s.sigKey)
		h[s.sigKey] = []string{string(sig)}
	}
}

// appendV1 appends one "v1,<base64 HMAC-SHA256(secret, msg)>" per secret
// to dst, after a space if dst holds a signature already.
func (s *Signer) appendV1(dst, msg []byte) []byte {
	for i := range s.macs {
		if len(dst) > 0 {
			dst = append(dst, ' ')
		}
		m, sum := s.mac(i, msg)
		dst = append(dst, "v1,"...)
		dst = base64.StdEncoding.AppendEncode(dst, sum)
		s.doneMAC(i, m)
	}
	return dst
}

// Signatures is the Standard Webhooks webhook-signature value: one
// "v1,<base64 HMAC-SHA256(key, id.timestamp.body)>" per key, space-separated.
func Signatures(keys [][]byte, id, timestamp string, body []byte) string {
	msg := appendInputString(nil, id, timestamp, body)
	var out []byte
	for _, k := range keys {
		mac := hmac.New(sha256.New, k)
		mac.Write(msg)
		if len(out) > 0 {
			out = append(out, ' ')
		}
		out = append(out, "v1,"...)
		out = base64.StdEncoding.AppendEncode(out, mac.Sum(nil))
	}
	return string(out)
}

// AsymmetricSignatures is the Standard Webhooks webhook-signature value
// of scheme v1a: one "v1a,<base64 Ed25519(key, id.timestamp.body)>" per
// key, space-separated.
func AsymmetricSignatures(keys []ed25519.PrivateKey, id, timestamp string, body []byte) string {
	msg := appendInputString(nil, id, timestamp, body)
	return string(appendV1a(nil, keys, msg))
}

// appendV1a appends one "v1a,<base64 Ed25519(key, msg)>" per key to dst,
// after a space if dst holds a signature already. crypto/ed25519 expands
// a key (its scalar and prefix: a SHA-512 of the seed) once and keeps it
// for as long as the key's bytes live, keyed by their address: keys given
// here are long-lived (the block's, or a host's from hostKeys).
func appendV1a(dst []byte, keys []ed25519.PrivateKey, msg []byte) []byte {
	for _, k := range keys {
		if len(dst) > 0 {
			dst = append(dst, ' ')
		}
		dst = append(dst, "v1a,"...)
		dst = base64.StdEncoding.AppendEncode(dst, ed25519.Sign(k, msg))
	}
	return dst
}

// appendInput appends Standard Webhooks' signing input, "id.timestamp.body",
// to dst, the timestamp in Unix seconds, with room after it for the
// header's value (every signature of a rotation of keys and secrets).
func appendInput(dst []byte, id string, unix int64, body []byte) []byte {
	dst = slices.Grow(dst, len(id)+len(body)+22+2*MaxSecrets*maxSig)
	dst = append(dst, id...)
	dst = append(dst, '.')
	dst = strconv.AppendInt(dst, unix, 10)
	dst = append(dst, '.')
	return append(dst, body...)
}

func appendInputString(dst []byte, id, timestamp string, body []byte) []byte {
	dst = append(dst, id...)
	dst = append(dst, '.')
	dst = append(dst, timestamp...)
	dst = append(dst, '.')
	return append(dst, body...)
}

// maxSig is the longest signature of one key in a header value, a space
// included: "v1a," and the base64 of 64 bytes.
const maxSig = 1 + len("v1a,") + (ed25519.SignatureSize+2)/3*4

// keptBuf is the largest buffer given back to bufs: a larger body's
// input is garbage once signed, so that a rare large webhook does not
// pin its size in the pool.
const keptBuf = 64 << 10

var bufs = sync.Pool{New: func() any { return new([]byte) }}

func getBuf() *[]byte { return bufs.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) <= keptBuf {
		bufs.Put(b)
	}
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
