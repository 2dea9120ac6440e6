package sign

import (
	"crypto/ed25519"
	"crypto/rand"
	"net/http"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// TestOfficialGoLibraryVerifies: the Standard Webhooks project's own Go
// library accepts what hookpace signs (one secret, and both of a
// rotation), and refuses a changed body or id.
func TestOfficialGoLibraryVerifies(t *testing.T) {
	const whsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // the spec's test secret
	key, err := ParseSecret(whsec)
	if err != nil {
		t.Fatal(err)
	}
	wh, err := standardwebhooks.NewWebhook(whsec)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`[{"order":42},{"order":43}]`) // a batch is signed as one body
	for _, keys := range [][][]byte{{key}, {make([]byte, 32), key}, {key, make([]byte, 24)}} {
		s, err := New(Options{Scheme: StandardWebhooks, Secrets: keys})
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		s.Sign(h, "partner.example", "000000000000002a-0000000000000031", body, time.Now())
		if err := wh.Verify(body, h); err != nil {
			t.Errorf("%d secrets: the official library refuses %v: %v", len(keys), h, err)
		}
		if wh.Verify([]byte(`[{"order":42},{"order":44}]`), h) == nil {
			t.Errorf("%d secrets: a changed body verifies", len(keys))
		}
		h.Set("Webhook-Id", "000000000000002a")
		if wh.Verify(body, h) == nil {
			t.Errorf("%d secrets: a changed id verifies", len(keys))
		}
	}
}

// TestPrefixedHeadersBesideProvider: with a prefix, hookpace's signature
// travels under Hookpace-Webhook-* beside a provider's own webhook-*
// headers, which stay as they were, and verifies with the official
// library once the prefix is taken off.
func TestPrefixedHeadersBesideProvider(t *testing.T) {
	const whsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	key, _ := ParseSecret(whsec)
	s, err := New(Options{Scheme: StandardWebhooks, Secrets: [][]byte{key}, Prefix: "Hookpace-"})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":"invoice.paid"}`)
	h := http.Header{"Webhook-Id": {"msg_provider"}, "Webhook-Timestamp": {"1"}, "Webhook-Signature": {"v1,provider"}}
	s.Sign(h, "partner.example", "0000000000000007", body, time.Now())
	if h.Get("Webhook-Id") != "msg_provider" || h.Get("Webhook-Signature") != "v1,provider" || h.Get("Webhook-Timestamp") != "1" {
		t.Fatalf("provider's headers changed: %v", h)
	}
	ours := http.Header{}
	for _, n := range []string{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"} {
		if h.Get("Hookpace-"+n) == "" {
			t.Fatalf("no Hookpace-%s in %v", n, h)
		}
		ours.Set(n, h.Get("Hookpace-"+n))
	}
	wh, _ := standardwebhooks.NewWebhook(whsec)
	if err := wh.Verify(body, ours); err != nil {
		t.Fatalf("official library refuses hookpace's prefixed signature: %v", err)
	}
}

// During a migration (v1a with a v1 secret beside it), the official Go
// library, which knows v1 only, still finds and accepts the v1 signature
// among the v1a ones.
func TestOfficialGoLibraryDuringV1aMigration(t *testing.T) {
	const whsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	key, err := ParseSecret(whsec)
	if err != nil {
		t.Fatal(err)
	}
	wh, err := standardwebhooks.NewWebhook(whsec)
	if err != nil {
		t.Fatal(err)
	}
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	s, err := New(Options{Scheme: StandardWebhooksV1a, Keys: []ed25519.PrivateKey{ed}, Secrets: [][]byte{key}})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"order":42}`)
	h := http.Header{}
	s.Sign(h, "partner.example", "000000000000002a", body, time.Now())
	if err := wh.Verify(body, h); err != nil {
		t.Errorf("the official library refuses %v: %v", h, err)
	}
	if wh.Verify([]byte(`{"order":43}`), h) == nil {
		t.Error("a changed body verifies")
	}
}
