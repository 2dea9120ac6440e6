package sign

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// The Standard Webhooks specification's test vector (the spec repository's
// libraries test against it).
const (
	vecSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vecID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vecTimestamp = 1614265330
	vecPayload   = `{"test": 2432232314}`
	vecSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func vecKey(t *testing.T) []byte {
	t.Helper()
	k, err := ParseSecret(vecSecret)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestStandardWebhooksVector(t *testing.T) {
	s, err := New(Options{Scheme: StandardWebhooks, Secrets: [][]byte{vecKey(t)}})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"Content-Type": {"application/json"}}
	s.Sign(h, "partner.example", vecID, []byte(vecPayload), time.Unix(vecTimestamp, 0))
	if got := h.Get(HeaderSignature); got != vecSignature {
		t.Errorf("webhook-signature = %q, want %q", got, vecSignature)
	}
	if got := h.Get(HeaderID); got != vecID {
		t.Errorf("webhook-id = %q", got)
	}
	if got := h.Get(HeaderTimestamp); got != "1614265330" {
		t.Errorf("webhook-timestamp = %q", got)
	}
	// One byte of the body changed: another signature.
	h2 := http.Header{}
	s.Sign(h2, "partner.example", vecID, []byte(`{"test": 2432232315}`), time.Unix(vecTimestamp, 0))
	if h2.Get(HeaderSignature) == vecSignature {
		t.Error("a changed body has the same signature")
	}
}

func TestParseSecret(t *testing.T) {
	for _, tc := range []struct {
		in, err string
	}{
		{vecSecret, ""},
		{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n", ""}, // prefix optional, space trimmed
		{"whsec_", "empty"},
		{"whsec_not*base64", "base64"},
		{"whsec_c2hvcnQ=", "at least 16"},
	} {
		_, err := ParseSecret(tc.in)
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("ParseSecret(%q) = %v, want error containing %q", tc.in, err, tc.err)
		}
	}
}

func TestRotationSendsBoth(t *testing.T) {
	other := bytes.Repeat([]byte{7}, 32)
	s, err := New(Options{Scheme: StandardWebhooks, Secrets: [][]byte{vecKey(t), other}})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	s.Sign(h, "partner.example", vecID, []byte(vecPayload), time.Unix(vecTimestamp, 0))
	sigs := strings.Split(h.Get(HeaderSignature), " ")
	if len(sigs) != 2 || sigs[0] != vecSignature {
		t.Fatalf("webhook-signature = %q, want the vector's signature then the second key's", h.Get(HeaderSignature))
	}
	if want := Signatures([][]byte{other}, vecID, "1614265330", []byte(vecPayload)); sigs[1] != want {
		t.Errorf("second signature = %q, want %q", sigs[1], want)
	}
	if _, err := New(Options{Scheme: StandardWebhooks, Secrets: [][]byte{other, other, other}}); err == nil {
		t.Error("three secrets accepted")
	}
}

func TestFreshTimestampPerAttempt(t *testing.T) {
	s, _ := New(Options{Scheme: StandardWebhooks, Secrets: [][]byte{vecKey(t)}})
	h1, h2 := http.Header{}, http.Header{}
	s.Sign(h1, "partner.example", "1", []byte("x"), time.Unix(100, 0))
	s.Sign(h2, "partner.example", "1", []byte("x"), time.Unix(160, 0))
	if h1.Get(HeaderTimestamp) != "100" || h2.Get(HeaderTimestamp) != "160" || h1.Get(HeaderSignature) == h2.Get(HeaderSignature) {
		t.Errorf("attempts: %v then %v", h1, h2)
	}
}

func TestHMACSHA256(t *testing.T) {
	key, body := []byte("It's a Secret to Everybody"), []byte("Hello, World!")
	s, err := New(Options{Scheme: HMACSHA256, Secrets: [][]byte{key}, Header: "X-Hub-Signature-256"})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	s.Sign(h, "partner.example", "1", body, time.Unix(1, 0))
	// GitHub's documented example for X-Hub-Signature-256.
	const want = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	if got := h.Get("X-Hub-Signature-256"); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write(body)
	if want != "sha256="+hex.EncodeToString(mac.Sum(nil)) {
		t.Error("vector disagrees with crypto/hmac")
	}
	if h.Get(HeaderSignature) != "" || h.Get(HeaderID) != "" {
		t.Errorf("hmac-sha256 sent Standard Webhooks headers: %v", h)
	}
}

func TestReplaceAndPassThrough(t *testing.T) {
	key := vecKey(t)
	for _, tc := range []struct {
		name    string
		opts    Options
		app     http.Header // what the app sent
		header  string      // the signature header
		replace bool
	}{
		{"sw", Options{Scheme: StandardWebhooks}, http.Header{"Webhook-Signature": {"v1,app"}, "Webhook-Id": {"app-id"}, "Webhook-Timestamp": {"5"}}, HeaderSignature, false},
		{"sw replace", Options{Scheme: StandardWebhooks, Replace: true}, http.Header{"Webhook-Signature": {"v1,app"}, "Webhook-Id": {"app-id"}, "Webhook-Timestamp": {"5"}}, HeaderSignature, true},
		{"hmac", Options{Scheme: HMACSHA256, Header: "X-Sig"}, http.Header{"X-Sig": {"sha256=app"}}, "X-Sig", false},
		{"hmac replace", Options{Scheme: HMACSHA256, Header: "X-Sig", Replace: true}, http.Header{"X-Sig": {"sha256=app"}}, "X-Sig", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Secrets = [][]byte{key}
			s, err := New(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			h := tc.app.Clone()
			s.Sign(h, "partner.example", vecID, []byte(vecPayload), time.Unix(vecTimestamp, 0))
			vals := h.Values(tc.header)
			if !tc.replace {
				if len(vals) != 1 || !strings.Contains(vals[0], "app") {
					t.Fatalf("app's signature not passed through: %v", h)
				}
				if tc.opts.Scheme == StandardWebhooks && (h.Get(HeaderID) != "app-id" || h.Get(HeaderTimestamp) != "5") {
					t.Fatalf("app's id/timestamp changed: %v", h)
				}
				return
			}
			if len(vals) != 1 || strings.Contains(vals[0], "app") {
				t.Fatalf("app's signature not replaced (exactly once): %v", h)
			}
			if tc.opts.Scheme == StandardWebhooks && (vals[0] != vecSignature || h.Get(HeaderID) != vecID) {
				t.Fatalf("replaced with %v", h)
			}
		})
	}
	// An unsigned request is signed whatever Replace says.
	s, _ := New(Options{Scheme: StandardWebhooks, Secrets: [][]byte{key}})
	h := http.Header{"Webhook-Id": {"stale"}}
	s.Sign(h, "partner.example", vecID, []byte(vecPayload), time.Unix(vecTimestamp, 0))
	if h.Get(HeaderSignature) != vecSignature || len(h.Values(HeaderID)) != 1 || h.Get(HeaderID) != vecID {
		t.Errorf("unsigned request: %v", h)
	}
}

func TestNewRejects(t *testing.T) {
	k := [][]byte{bytes.Repeat([]byte{1}, 32)}
	for _, o := range []Options{
		{Scheme: "rsa", Secrets: k},
		{Scheme: StandardWebhooks},
		{Scheme: HMACSHA256, Secrets: k},
		{Scheme: HMACSHA256, Secrets: append(k, k[0]), Header: "X"},
		{Scheme: StandardWebhooks, Secrets: [][]byte{{}}},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

// BenchmarkSign is the cost a signed host adds to each attempt (1 KiB
// body), by scheme, and under primitives what each scheme's cryptography
// alone costs: Ed25519 (a scalar multiplication and two SHA-512 passes
// over the input) against HMAC-SHA256 (two SHA-256 passes).
func BenchmarkSign(b *testing.B) {
	key := bytes.Repeat([]byte{1}, 32)
	master := ed25519.NewKeyFromSeed(make([]byte, 32))
	body := bytes.Repeat([]byte{'x'}, 1024)
	for _, bc := range []struct {
		name string
		opts Options
	}{
		{"standard-webhooks", Options{Scheme: StandardWebhooks, Secrets: [][]byte{key}}},
		{"standard-webhooks-rotation", Options{Scheme: StandardWebhooks, Secrets: [][]byte{key, key}}},
		{"hmac-sha256", Options{Scheme: HMACSHA256, Secrets: [][]byte{key}, Header: "X-Sig"}},
		{"v1a", Options{Scheme: StandardWebhooksV1a, Keys: []ed25519.PrivateKey{master}}},
		{"v1a-per-host", Options{Scheme: StandardWebhooksV1a, Keys: []ed25519.PrivateKey{master}, PerHost: true}},
		{"v1a-and-v1", Options{Scheme: StandardWebhooksV1a, Keys: []ed25519.PrivateKey{master}, Secrets: [][]byte{key}}},
	} {
		s, err := New(bc.opts)
		if err != nil {
			b.Fatal(err)
		}
		now := time.Unix(1614265330, 0)
		b.Run(bc.name, func(b *testing.B) {
			cpuPerOp(b, func() {
				s.Sign(http.Header{"Content-Type": {"application/json"}}, "partner.example", "0000000000000001", body, now)
			})
		})
	}
	msg := appendInputString(nil, "0000000000000001", "1614265330", body)
	b.Run("primitives/ed25519", func(b *testing.B) {
		cpuPerOp(b, func() { ed25519.Sign(master, msg) })
	})
	b.Run("primitives/hmac-sha256", func(b *testing.B) {
		cpuPerOp(b, func() {
			m := hmac.New(sha256.New, key)
			m.Write(msg)
			m.Sum(nil)
		})
	})
}

// cpuPerOp runs op as b's loop and reports, besides the allocations,
// the process's CPU time per op (cpu-ns/op; run with -cpu 1 so that
// it is the loop's and the collector's alone).
func cpuPerOp(b *testing.B, op func()) {
	b.ReportAllocs()
	c0, ok := processCPU()
	for b.Loop() {
		op()
	}
	if c1, _ := processCPU(); ok {
		b.ReportMetric(float64(c1-c0)/float64(b.N), "cpu-ns/op")
	}
}

// Signatures made one after another and at once, of bodies of every
// size (larger than the buffers kept between attempts too), verify
// each with its own body: no attempt reads another's bytes.
func TestSignBuffersNotShared(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	secret := bytes.Repeat([]byte{3}, 32)
	v1a, _ := New(Options{Scheme: StandardWebhooksV1a, Keys: []ed25519.PrivateKey{priv}, Secrets: [][]byte{secret}})
	plain, _ := New(Options{Scheme: HMACSHA256, Secrets: [][]byte{secret}, Header: "X-Sig"})
	sizes := []int{0, 1, 1024, keptBuf + 1, 3, 200 << 10, 17}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i, n := range sizes {
				body := bytes.Repeat([]byte{byte('a' + g + i)}, n)
				id := fmt.Sprintf("msg_%d_%d", g, i)
				h := http.Header{}
				v1a.Sign(h, "partner.example", id, body, time.Unix(int64(1700000000+i), 0))
				if n := verifyV1a(t, pub, h, body); n != 1 {
					t.Errorf("%s (%d bytes): %d v1a signatures verify, want 1", id, len(body), n)
				}
				want := Signatures([][]byte{secret}, id, h.Get(HeaderTimestamp), body)
				if got := h.Get(HeaderSignature); !strings.HasSuffix(got, " "+want) {
					t.Errorf("%s: signature %q, want its v1 to be %q", id, got, want)
				}
				hp := http.Header{}
				plain.Sign(hp, "partner.example", id, body, time.Unix(1, 0))
				if got, want := hp.Get("X-Sig"), BodySignature(secret, body); got != want {
					t.Errorf("%s: X-Sig %q, want %q", id, got, want)
				}
			}
		})
	}
	wg.Wait()
}
