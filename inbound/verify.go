// Package inbound puts hookpace in front of an app's own webhook endpoint:
// a route verifies a provider's signature at the door, spools the webhook
// for the app (answered once durable) and passes everything else, and
// the handshakes its sync rules name, to the app synchronously.
package inbound

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/sign"
)

// Reasons a signature is refused, as the 401 and the metric give them.
const (
	ReasonMissing   = "missing"   // no signature (or its timestamp)
	ReasonMalformed = "malformed" // a signature header hookpace cannot read
	ReasonStale     = "stale"     // its timestamp is outside the tolerance
	ReasonMismatch  = "mismatch"  // no signature matches the body
)

// Rejection is why a request's signature was refused. Its text never
// holds the secret or an expected signature.
type Rejection struct {
	Reason string // one of the Reason constants
	Detail string // what was wrong, for the 401's body and the log
}

func (r *Rejection) Error() string { return r.Reason + ": " + r.Detail }

func reject(reason, format string, args ...any) *Rejection {
	return &Rejection{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// VerifyOptions configure a Verifier.
type VerifyOptions struct {
	Scheme string // one of config.Verify*
	Secret []byte // for standard-webhooks the key decoded from whsec_…; else the secret's text
	// Public are standard-webhooks' Ed25519 public keys (whpk_…), which
	// verify its v1a signatures (several during a rotation).
	Public    []ed25519.PublicKey
	Tolerance time.Duration
	// hmac only.
	Header    string
	Algorithm string // sha256, sha1 or sha512
	Encoding  string // hex or base64
	Prefix    string
}

// Verifier checks one route's signatures. It is safe for concurrent use.
type Verifier struct {
	opts VerifyOptions
	hash func() hash.Hash
}

// NewVerifier checks opts and returns a Verifier.
func NewVerifier(opts VerifyOptions) (*Verifier, error) {
	if len(opts.Secret) == 0 && (len(opts.Public) == 0 || opts.Scheme != config.VerifyStandardWebhooks) {
		return nil, errors.New("secret is empty")
	}
	if opts.Tolerance <= 0 {
		opts.Tolerance = 5 * time.Minute
	}
	v := &Verifier{opts: opts, hash: sha256.New}
	switch opts.Scheme {
	case config.VerifyStandardWebhooks, config.VerifyStripe, config.VerifyGitHub, config.VerifyShopify, config.VerifySlack:
	case config.VerifyHMAC:
		if opts.Header == "" {
			return nil, errors.New("hmac needs a header")
		}
		switch opts.Algorithm {
		case "sha256", "":
		case "sha1":
			v.hash = sha1.New
		case "sha512":
			v.hash = sha512.New
		default:
			return nil, fmt.Errorf("unknown algorithm %q", opts.Algorithm)
		}
		if opts.Encoding != "hex" && opts.Encoding != "base64" && opts.Encoding != "" {
			return nil, fmt.Errorf("unknown encoding %q", opts.Encoding)
		}
	default:
		return nil, fmt.Errorf("unknown scheme %q", opts.Scheme)
	}
	return v, nil
}

// ParseVerifySecret turns a secret's text into the keys scheme signs with:
// the text itself for the HMAC schemes (Stripe's whsec_… included: Stripe
// signs with the whole string); for standard-webhooks, white-space
// separated keys, at most one whsec_ (HMAC, signatures v1) and any number
// of whpk_ (Ed25519 public keys, signatures v1a; two during a rotation).
func ParseVerifySecret(scheme, text string) (secret []byte, public []ed25519.PublicKey, err error) {
	text = strings.TrimSpace(text)
	if scheme != config.VerifyStandardWebhooks {
		if text == "" {
			return nil, nil, errors.New("secret is empty")
		}
		return []byte(text), nil, nil
	}
	keys := strings.Fields(text)
	if len(keys) == 0 {
		return nil, nil, errors.New("secret is empty")
	}
	for i, k := range keys {
		switch {
		case strings.HasPrefix(k, sign.PublicKeyPrefix):
			pub, err := sign.ParsePublicKey(k)
			if err != nil {
				return nil, nil, fmt.Errorf("key %d: %w", i+1, err)
			}
			public = append(public, pub)
		case strings.HasPrefix(k, sign.SecretKeyPrefix):
			return nil, nil, fmt.Errorf("key %d is a private key (whsk_): a receiver needs only its public key (whpk_), which the sender publishes", i+1)
		case secret != nil:
			return nil, nil, fmt.Errorf("key %d: a second whsec_ secret; give one, and whpk_ public keys for v1a", i+1)
		default:
			if secret, err = sign.ParseSecret(k); err != nil {
				return nil, nil, fmt.Errorf("key %d: %w (or whpk_ and base64 of an Ed25519 public key)", i+1, err)
			}
		}
	}
	return secret, public, nil
}

// Verify checks the signature of a request with header h and body, received
// at now. nil: it is the provider's.
func (v *Verifier) Verify(h http.Header, body []byte, now time.Time) *Rejection {
	switch v.opts.Scheme {
	case config.VerifyStandardWebhooks:
		return v.standard(h, body, now)
	case config.VerifyStripe:
		return v.stripe(h, body, now)
	case config.VerifyGitHub:
		return v.prefixed(h, "X-Hub-Signature-256", "sha256=", body, hex.DecodeString)
	case config.VerifyShopify:
		return v.prefixed(h, "X-Shopify-Hmac-Sha256", "", body, base64.StdEncoding.DecodeString)
	case config.VerifySlack:
		return v.slack(h, body, now)
	default:
		dec := hex.DecodeString
		if v.opts.Encoding == "base64" {
			dec = base64.StdEncoding.DecodeString
		}
		return v.prefixed(h, v.opts.Header, v.opts.Prefix, body, dec)
	}
}

// mac is HMAC(secret, parts...).
func (v *Verifier) mac(parts ...[]byte) []byte {
	m := hmac.New(v.hash, v.opts.Secret)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// fresh checks a Unix timestamp against the tolerance, both ways.
func (v *Verifier) fresh(ts string, now time.Time) *Rejection {
	sec, err := strconv.ParseInt(strings.TrimSpace(ts), 10, 64)
	if err != nil {
		return reject(ReasonMalformed, "timestamp %q is not Unix seconds", trunc(ts))
	}
	t := time.Unix(sec, 0)
	if d := now.Sub(t); d > v.opts.Tolerance || -d > v.opts.Tolerance {
		return reject(ReasonStale, "timestamp %d is %s from now, more than the %s tolerance", sec, d.Truncate(time.Second), v.opts.Tolerance)
	}
	return nil
}

// standard is Standard Webhooks: webhook-signature holds space-separated
// "v1,<base64 HMAC-SHA256(key, id.timestamp.body)>" and
// "v1a,<base64 Ed25519(key, id.timestamp.body)>"; one that a key of the
// route verifies is enough.
func (v *Verifier) standard(h http.Header, body []byte, now time.Time) *Rejection {
	id, ts, sigs := h.Get(sign.HeaderID), h.Get(sign.HeaderTimestamp), h.Get(sign.HeaderSignature)
	if id == "" || ts == "" || sigs == "" {
		return reject(ReasonMissing, "want webhook-id, webhook-timestamp and webhook-signature")
	}
	if r := v.fresh(ts, now); r != nil {
		return r
	}
	var want, msg []byte
	for _, s := range strings.Fields(sigs) {
		ver, b64, ok := strings.Cut(s, ",")
		if !ok || ver == "v1" && v.opts.Secret == nil || ver == "v1a" && v.opts.Public == nil || ver != "v1" && ver != "v1a" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			continue
		}
		if ver == "v1" {
			if want == nil {
				want = v.mac([]byte(id), []byte{'.'}, []byte(ts), []byte{'.'}, body)
			}
			if hmac.Equal(got, want) {
				return nil
			}
			continue
		}
		if msg == nil {
			msg = make([]byte, 0, len(id)+len(ts)+2+len(body))
			msg = append(append(append(append(append(msg, id...), '.'), ts...), '.'), body...)
		}
		for _, pub := range v.opts.Public {
			if ed25519.Verify(pub, msg, got) {
				return nil
			}
		}
	}
	return reject(ReasonMismatch, "no %s signature in webhook-signature matches", v.versions())
}

// versions names the signature versions v's keys verify.
func (v *Verifier) versions() string {
	switch {
	case v.opts.Secret != nil && v.opts.Public != nil:
		return "v1 or v1a"
	case v.opts.Public != nil:
		return "v1a"
	}
	return "v1"
}

// stripe is Stripe-Signature: "t=<unix>,v1=<hex HMAC-SHA256(secret, t.body)>"
// (several v1 during a rotation; one match is enough).
func (v *Verifier) stripe(h http.Header, body []byte, now time.Time) *Rejection {
	hv := h.Get("Stripe-Signature")
	if hv == "" {
		return reject(ReasonMissing, "no Stripe-Signature")
	}
	var ts string
	var sigs []string
	for _, kv := range strings.Split(hv, ",") {
		k, val, _ := strings.Cut(strings.TrimSpace(kv), "=")
		switch k {
		case "t":
			ts = val
		case "v1":
			sigs = append(sigs, val)
		}
	}
	if ts == "" || len(sigs) == 0 {
		return reject(ReasonMalformed, "Stripe-Signature wants t= and v1=")
	}
	if r := v.fresh(ts, now); r != nil {
		return r
	}
	want := v.mac([]byte(ts), []byte{'.'}, body)
	for _, s := range sigs {
		got, err := hex.DecodeString(s)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return reject(ReasonMismatch, "no v1 signature in Stripe-Signature matches")
}

// slack is X-Slack-Signature: "v0=<hex HMAC-SHA256(secret, v0:ts:body)>",
// with ts from X-Slack-Request-Timestamp.
func (v *Verifier) slack(h http.Header, body []byte, now time.Time) *Rejection {
	ts, sig := h.Get("X-Slack-Request-Timestamp"), h.Get("X-Slack-Signature")
	if ts == "" || sig == "" {
		return reject(ReasonMissing, "want X-Slack-Signature and X-Slack-Request-Timestamp")
	}
	if r := v.fresh(ts, now); r != nil {
		return r
	}
	hexSig, ok := strings.CutPrefix(sig, "v0=")
	got, err := hex.DecodeString(hexSig)
	if !ok || err != nil {
		return reject(ReasonMalformed, "X-Slack-Signature wants v0=<hex>")
	}
	if !hmac.Equal(got, v.mac([]byte("v0:"+ts+":"), body)) {
		return reject(ReasonMismatch, "X-Slack-Signature does not match")
	}
	return nil
}

// prefixed is a digest of the body alone in one header, after prefix.
func (v *Verifier) prefixed(h http.Header, name, prefix string, body []byte, decode func(string) ([]byte, error)) *Rejection {
	hv := h.Get(name)
	if hv == "" {
		return reject(ReasonMissing, "no %s", name)
	}
	enc, ok := strings.CutPrefix(hv, prefix)
	got, err := decode(strings.TrimSpace(enc))
	if !ok || err != nil {
		return reject(ReasonMalformed, "%s wants %s<digest>", name, prefix)
	}
	if !hmac.Equal(got, v.mac(body)) {
		return reject(ReasonMismatch, "%s does not match", name)
	}
	return nil
}

func trunc(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}
