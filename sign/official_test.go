package sign

import (
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
		s.Sign(h, "000000000000002a-0000000000000031", body, time.Now())
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
