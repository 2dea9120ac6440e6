package sign

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// verify is the Go receiver snippet of docs/signing.md, verbatim;
// TestReadmeGoVerifier checks that the page still says this.
func verify(key []byte, h http.Header, body []byte) bool {
	id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(t, 0)).Abs() > 5*time.Minute {
		return false
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, sig := range strings.Fields(h.Get("webhook-signature")) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return true // then skip the event if webhook-id was seen before
		}
	}
	return false
}

func TestReadmeGoVerifier(t *testing.T) {
	readme, err := os.ReadFile("../docs/signing.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	fn := text[strings.Index(text, "func verify("):]
	fn = fn[:strings.Index(fn, "\n}\n")+3]
	if !strings.Contains(string(readme), "```go\n"+fn+"```") {
		t.Errorf("docs/signing.md's Go verifier differs from verify in sign/readme_test.go:\n%s", fn)
	}

	key := vecKey(t)
	old := make([]byte, 32)
	body := []byte(`{"order": 42}`)
	for _, keys := range [][][]byte{{key}, {old, key}, {key, old}} {
		s, _ := New(Options{Scheme: StandardWebhooks, Secrets: keys})
		h := http.Header{}
		s.Sign(h, "partner.example", "00000000000000a1", body, time.Now())
		if !verify(key, h, body) {
			t.Errorf("%d secrets: the README's verifier refuses %v", len(keys), h)
		}
		if verify(key, h, []byte(`{"order": 43}`)) {
			t.Error("the README's verifier accepts a changed body")
		}
	}
	signer, _ := New(Options{Scheme: StandardWebhooks, Secrets: [][]byte{key}})
	h := http.Header{}
	signer.Sign(h, "partner.example", "1", body, time.Now().Add(-time.Hour))
	if verify(key, h, body) {
		t.Error("the README's verifier accepts an hour-old timestamp")
	}
}
