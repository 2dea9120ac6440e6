package inbound

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/sign"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Published vectors: the Standard Webhooks spec's, GitHub's ("Validating
// webhook deliveries") and Slack's ("Verifying requests from Slack").
const (
	swSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	swID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	swTS     = 1614265330
	swBody   = `{"test": 2432232314}`
	swSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

	ghSecret = "It's a Secret to Everybody"
	ghBody   = "Hello, World!"
	ghSig    = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"

	slackSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	slackTS     = 1531420618
	slackBody   = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	slackSig    = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"

	stripeSecret = "whsec_test_secret"
	shopSecret   = "shpss_0123456789abcdef"
)

// macOf is HMAC over parts with h, as the providers document it.
func macOf(h func() hash.Hash, key string, parts ...string) []byte {
	m := hmac.New(h, []byte(key))
	m.Write([]byte(strings.Join(parts, "")))
	return m.Sum(nil)
}

func newV(t *testing.T, o VerifyOptions, secret string) *Verifier {
	t.Helper()
	key, pub, err := ParseVerifySecret(o.Scheme, secret)
	if err != nil {
		t.Fatal(err)
	}
	o.Secret, o.Public = key, pub
	v, err := NewVerifier(o)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestVerifySchemes(t *testing.T) {
	swAt := time.Unix(swTS, 0)
	slackAt := time.Unix(slackTS, 0)
	stripeAt := time.Unix(1700000000, 0)
	stripeBody := `{"id":"evt_1","object":"event"}`
	stripeGood := hex.EncodeToString(macOf(sha256.New, stripeSecret, "1700000000.", stripeBody))
	shopBody := `{"id":820982911946154508}`
	shopGood := base64.StdEncoding.EncodeToString(macOf(sha256.New, shopSecret, shopBody))
	sw := VerifyOptions{Scheme: config.VerifyStandardWebhooks}
	swh := func(id, ts, sig string) http.Header {
		return http.Header{"Webhook-Id": {id}, "Webhook-Timestamp": {ts}, "Webhook-Signature": {sig}}
	}
	tests := []struct {
		name   string
		opts   VerifyOptions
		secret string
		h      http.Header
		body   string
		now    time.Time
		want   string // "" accepted, else the reason
	}{
		{"standard vector", sw, swSecret, swh(swID, strconv.Itoa(swTS), swSig), swBody, swAt, ""},
		{"standard rotation: second matches", sw, swSecret, swh(swID, strconv.Itoa(swTS), "v1,AAAA "+swSig), swBody, swAt, ""},
		{"standard other body", sw, swSecret, swh(swID, strconv.Itoa(swTS), swSig), `{"test": 2432232315}`, swAt, ReasonMismatch},
		{"standard other id", sw, swSecret, swh("msg_x", strconv.Itoa(swTS), swSig), swBody, swAt, ReasonMismatch},
		{"standard stale", sw, swSecret, swh(swID, strconv.Itoa(swTS), swSig), swBody, swAt.Add(5*time.Minute + time.Second), ReasonStale},
		{"standard from the future", sw, swSecret, swh(swID, strconv.Itoa(swTS), swSig), swBody, swAt.Add(-6 * time.Minute), ReasonStale},
		{"standard at the tolerance", sw, swSecret, swh(swID, strconv.Itoa(swTS), swSig), swBody, swAt.Add(5 * time.Minute), ""},
		{"standard missing", sw, swSecret, http.Header{}, swBody, swAt, ReasonMissing},
		{"standard v2 only", sw, swSecret, swh(swID, strconv.Itoa(swTS), strings.Replace(swSig, "v1,", "v2,", 1)), swBody, swAt, ReasonMismatch},
		{"standard bad timestamp", sw, swSecret, swh(swID, "soon", swSig), swBody, swAt, ReasonMalformed},

		{"github vector", VerifyOptions{Scheme: config.VerifyGitHub}, ghSecret, http.Header{"X-Hub-Signature-256": {ghSig}}, ghBody, time.Now(), ""},
		{"github other body", VerifyOptions{Scheme: config.VerifyGitHub}, ghSecret, http.Header{"X-Hub-Signature-256": {ghSig}}, "Hello, World?", time.Now(), ReasonMismatch},
		{"github sha1 only", VerifyOptions{Scheme: config.VerifyGitHub}, ghSecret, http.Header{"X-Hub-Signature": {"sha1=01"}}, ghBody, time.Now(), ReasonMissing},
		{"github no prefix", VerifyOptions{Scheme: config.VerifyGitHub}, ghSecret, http.Header{"X-Hub-Signature-256": {ghSig[7:]}}, ghBody, time.Now(), ReasonMalformed},

		{"slack vector", VerifyOptions{Scheme: config.VerifySlack}, slackSecret,
			http.Header{"X-Slack-Signature": {slackSig}, "X-Slack-Request-Timestamp": {strconv.Itoa(slackTS)}}, slackBody, slackAt, ""},
		{"slack stale", VerifyOptions{Scheme: config.VerifySlack}, slackSecret,
			http.Header{"X-Slack-Signature": {slackSig}, "X-Slack-Request-Timestamp": {strconv.Itoa(slackTS)}}, slackBody, slackAt.Add(time.Hour), ReasonStale},
		{"slack other timestamp", VerifyOptions{Scheme: config.VerifySlack}, slackSecret,
			http.Header{"X-Slack-Signature": {slackSig}, "X-Slack-Request-Timestamp": {strconv.Itoa(slackTS + 1)}}, slackBody, slackAt, ReasonMismatch},

		{"stripe", VerifyOptions{Scheme: config.VerifyStripe}, stripeSecret,
			http.Header{"Stripe-Signature": {"t=1700000000,v1=" + stripeGood + ",v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39"}}, stripeBody, stripeAt, ""},
		{"stripe rotation", VerifyOptions{Scheme: config.VerifyStripe}, stripeSecret,
			http.Header{"Stripe-Signature": {"t=1700000000,v1=00ff,v1=" + stripeGood}}, stripeBody, stripeAt, ""},
		{"stripe stale", VerifyOptions{Scheme: config.VerifyStripe}, stripeSecret,
			http.Header{"Stripe-Signature": {"t=1700000000,v1=" + stripeGood}}, stripeBody, stripeAt.Add(10 * time.Minute), ReasonStale},
		{"stripe longer tolerance", VerifyOptions{Scheme: config.VerifyStripe, Tolerance: 15 * time.Minute}, stripeSecret,
			http.Header{"Stripe-Signature": {"t=1700000000,v1=" + stripeGood}}, stripeBody, stripeAt.Add(10 * time.Minute), ""},
		{"stripe other t", VerifyOptions{Scheme: config.VerifyStripe}, stripeSecret,
			http.Header{"Stripe-Signature": {"t=1700000001,v1=" + stripeGood}}, stripeBody, stripeAt, ReasonMismatch},
		{"stripe no v1", VerifyOptions{Scheme: config.VerifyStripe}, stripeSecret,
			http.Header{"Stripe-Signature": {"t=1700000000"}}, stripeBody, stripeAt, ReasonMalformed},

		{"shopify", VerifyOptions{Scheme: config.VerifyShopify}, shopSecret, http.Header{"X-Shopify-Hmac-Sha256": {shopGood}}, shopBody, time.Now(), ""},
		{"shopify other secret", VerifyOptions{Scheme: config.VerifyShopify}, shopSecret + "x", http.Header{"X-Shopify-Hmac-Sha256": {shopGood}}, shopBody, time.Now(), ReasonMismatch},

		{"hmac sha1 hex prefix", VerifyOptions{Scheme: config.VerifyHMAC, Header: "X-Signature", Algorithm: "sha1", Encoding: "hex", Prefix: "sha1="}, "k",
			http.Header{"X-Signature": {"sha1=" + hex.EncodeToString(macOf(sha1.New, "k", "body"))}}, "body", time.Now(), ""},
		{"hmac sha512 base64", VerifyOptions{Scheme: config.VerifyHMAC, Header: "X-Signature", Algorithm: "sha512", Encoding: "base64"}, "k",
			http.Header{"X-Signature": {base64.StdEncoding.EncodeToString(macOf(sha512.New, "k", "body"))}}, "body", time.Now(), ""},
		{"hmac sha256 given for sha512", VerifyOptions{Scheme: config.VerifyHMAC, Header: "X-Signature", Algorithm: "sha512", Encoding: "hex"}, "k",
			http.Header{"X-Signature": {hex.EncodeToString(macOf(sha256.New, "k", "body"))}}, "body", time.Now(), ReasonMismatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := newV(t, tc.opts, tc.secret)
			r := v.Verify(tc.h, []byte(tc.body), tc.now)
			switch {
			case tc.want == "" && r != nil:
				t.Fatalf("refused: %v", r)
			case tc.want != "" && r == nil:
				t.Fatalf("accepted, want %s", tc.want)
			case r != nil && r.Reason != tc.want:
				t.Fatalf("reason %q (%v), want %q", r.Reason, r, tc.want)
			}
			if r != nil && strings.Contains(r.Error(), tc.secret) {
				t.Fatalf("the rejection shows the secret: %v", r)
			}
		})
	}
}

// TestStandardWebhooksOfficialLibrary: what the Standard Webhooks
// project's own Go library signs verifies here, and what it refuses is
// refused here.
func TestStandardWebhooksOfficialLibrary(t *testing.T) {
	wh, err := standardwebhooks.NewWebhook(swSecret)
	if err != nil {
		t.Fatal(err)
	}
	v := newV(t, VerifyOptions{Scheme: config.VerifyStandardWebhooks}, swSecret)
	now := time.Now()
	for i, body := range []string{`{"a":1}`, ``, strings.Repeat("x", 10000)} {
		id := "msg_" + strconv.Itoa(i)
		sig, err := wh.Sign(id, now, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{"Webhook-Id": {id}, "Webhook-Timestamp": {strconv.FormatInt(now.Unix(), 10)}, "Webhook-Signature": {sig}}
		if r := v.Verify(h, []byte(body), now); r != nil {
			t.Errorf("body %d: the library's signature is refused: %v", i, r)
		}
		if (wh.Verify([]byte(body+"!"), h) == nil) != (v.Verify(h, []byte(body+"!"), now) == nil) {
			t.Errorf("body %d: the library and hookpace disagree about a changed body", i)
		}
	}
}

func TestNewVerifierRejects(t *testing.T) {
	for _, o := range []VerifyOptions{
		{Scheme: config.VerifyGitHub},
		{Scheme: "gitlab", Secret: []byte("k")},
		{Scheme: config.VerifyHMAC, Secret: []byte("k")},
		{Scheme: config.VerifyHMAC, Secret: []byte("k"), Header: "X-Sig", Algorithm: "md5"},
	} {
		if _, err := NewVerifier(o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

// The Standard Webhooks v1a vector that two implementations agree on.
const (
	v1aSeed   = "whsk_V0VCSE9PS0FTWU1NRVRSSUNURVNUUFJJVkFURUtFWTE="
	v1aPublic = "whpk_4rQZjjkCnn4m/ciYBaRPSZTA+Y/UwqgD6hgxOllF28g="
	v1aID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	v1aTS     = 1614265330
	v1aBody   = `{"test": 2432232314}`
	v1aSig    = "v1a,wY2SZc3TRkb1YQ3GVtlawNyAeN6SEYiztr+FExZJzpEd7BY8kO2olVTahf5NW2nn86HK/3ZM9G2VRPMiA51jDA=="
)

// TestStandardWebhooksV1a: a route whose secret holds whpk_ public keys
// verifies v1a signatures (the fixed vector, and what hookpace's own
// signer makes from the vector's seed); v1 and v1a may stand together
// and any that a key verifies passes.
func TestStandardWebhooksV1a(t *testing.T) {
	ts := strconv.Itoa(v1aTS)
	other, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	otherPub := sign.PublicKey(other)
	sw := VerifyOptions{Scheme: config.VerifyStandardWebhooks}
	tests := []struct {
		name, secret, id string
		ts               int
		sig, body, want  string
	}{
		{"vector", v1aPublic, v1aID, v1aTS, v1aSig, v1aBody, ""},
		{"other body", v1aPublic, v1aID, v1aTS, v1aSig, `{"test": 2432232315}`, ReasonMismatch},
		{"other id", v1aPublic, "msg_x", v1aTS, v1aSig, v1aBody, ReasonMismatch},
		{"rotation: second key", otherPub + "\n" + v1aPublic + "\n", v1aID, v1aTS, v1aSig, v1aBody, ""},
		{"other key only", otherPub, v1aID, v1aTS, v1aSig, v1aBody, ReasonMismatch},
		{"v1 beside v1a", v1aPublic, v1aID, v1aTS, "v1,AAAA " + v1aSig, v1aBody, ""},
		{"v1a without a public key", swSecret, v1aID, v1aTS, v1aSig, v1aBody, ReasonMismatch},
		{"whsec and whpk together: v1a", swSecret + " " + v1aPublic, v1aID, v1aTS, v1aSig, v1aBody, ""},
		{"whsec and whpk together: v1", swSecret + " " + v1aPublic, swID, swTS, swSig, swBody, ""},
		{"v1a not base64", v1aPublic, v1aID, v1aTS, "v1a,!!!", v1aBody, ReasonMismatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := newV(t, sw, tc.secret)
			h := http.Header{"Webhook-Id": {tc.id}, "Webhook-Timestamp": {strconv.Itoa(tc.ts)}, "Webhook-Signature": {tc.sig}}
			r := v.Verify(h, []byte(tc.body), time.Unix(int64(tc.ts), 0))
			switch {
			case tc.want == "" && r != nil:
				t.Fatalf("refused: %v", r)
			case tc.want != "" && (r == nil || r.Reason != tc.want):
				t.Fatalf("got %v, want %s", r, tc.want)
			}
		})
	}

	// hookpace's own signer, given the vector's seed, signs what verifies.
	keyFile := filepath.Join(t.TempDir(), "seed")
	if err := os.WriteFile(keyFile, []byte(v1aSeed), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := sign.ReadKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if got := sign.AsymmetricSignatures([]ed25519.PrivateKey{k}, v1aID, ts, []byte(v1aBody)); got != v1aSig {
		t.Fatalf("hookpace signs the vector %q, want %q", got, v1aSig)
	}
	if got := sign.PublicKey(k.Public().(ed25519.PublicKey)); got != v1aPublic {
		t.Fatalf("the seed's public key is %s, want %s", got, v1aPublic)
	}
}

func TestParseVerifySecretStandard(t *testing.T) {
	for _, bad := range []string{"", v1aSeed, swSecret + " " + swSecret, "whpk_AAAA", "whsec_!!"} {
		if _, _, err := ParseVerifySecret(config.VerifyStandardWebhooks, bad); err == nil {
			t.Errorf("%q accepted", bad)
		} else if strings.Contains(err.Error(), "V0VCSE9PS0") {
			t.Errorf("the error shows the key: %v", err)
		}
	}
	sec, pub, err := ParseVerifySecret(config.VerifyStandardWebhooks, v1aPublic+"\n"+swSecret+"\n")
	if err != nil || sec == nil || len(pub) != 1 {
		t.Fatalf("whpk and whsec: %v, %d public keys, secret %v", err, len(pub), sec != nil)
	}
}
