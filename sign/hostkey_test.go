package sign

import (
	"crypto/ed25519"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"
)

// With PerHost, each host is signed with a key of its own, derived from
// the master key: the same at every derivation, verified by that host's
// public key alone, and neither the master's nor another host's.
func TestPerHostKeys(t *testing.T) {
	master := ed25519.NewKeyFromSeed(make([]byte, 32))
	next := ed25519.NewKeyFromSeed(append(make([]byte, 31), 1))
	if !HostKey(master, "a.example").Equal(HostKey(master, "a.example")) {
		t.Fatal("a host's key differs between two derivations")
	}
	s, err := New(Options{Scheme: StandardWebhooksV1a, Keys: []ed25519.PrivateKey{master, next}, PerHost: true})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"n":1}`)
	now := time.Unix(1700000000, 0)
	msg := []byte("msg_1.1700000000." + string(body))
	verifiers := func(sigs string) []string {
		var out []string
		for _, f := range strings.Fields(sigs) {
			raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(f, "v1a,"))
			for name, pub := range map[string]ed25519.PrivateKey{
				"a": HostKey(master, "a.example"), "a-next": HostKey(next, "a.example"),
				"b": HostKey(master, "b.example"), "master": master, "next": next,
			} {
				if ed25519.Verify(pub.Public().(ed25519.PublicKey), msg, raw) {
					out = append(out, name)
				}
			}
		}
		return out
	}
	h := http.Header{}
	s.Sign(h, "a.example", "msg_1", body, now)
	got := verifiers(h.Get(HeaderSignature))
	if len(got) != 2 || !(got[0] == "a" && got[1] == "a-next") {
		t.Fatalf("a.example's signatures verify with %v, want a's two keys (rotation) alone", got)
	}
	h = http.Header{}
	s.Sign(h, "b.example", "msg_1", body, now)
	if got := verifiers(h.Get(HeaderSignature)); len(got) != 1 || got[0] != "b" {
		t.Fatalf("b.example's signatures verify with %v, want b's key alone", got)
	}
	if k := s.Keys("a.example"); len(k) != 2 || !k[0].Equal(HostKey(master, "a.example")) {
		t.Fatal("Keys does not give the host's own keys")
	}
	shared, _ := New(Options{Scheme: StandardWebhooksV1a, Keys: []ed25519.PrivateKey{master}})
	if k := shared.Keys("a.example"); len(k) != 1 || !k[0].Equal(master) {
		t.Fatal("without PerHost the block's key signs for every host")
	}
}
