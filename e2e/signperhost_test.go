package e2e

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestSignV1aPerPartner: with hookpace's own key, each partner's v1a
// signatures verify with the key hookpace sign public-key prints for it
// and with no other partner's, so a partner can't replay what it received
// to another that trusts hookpace. per_host: false signs every partner
// with the one key, as before.
func TestSignV1aPerPartner(t *testing.T) {
	t.Parallel()
	a, b, shared := NewReceiver(t), NewReceiver(t), NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
defaults:
  sign: {scheme: standard-webhooks-v1a}
hosts:
  %q: {}
  %q: {}
  %q: {sign: {scheme: standard-webhooks-v1a, per_host: false}}
`, a.Host(), b.Host(), shared.Host()))
	pubOf := func(host string) ed25519.PublicKey {
		t.Helper()
		out, err := exec.Command(binary, "sign", "public-key", "--config", hp.Config, "--host", host).CombinedOutput()
		raw, derr := base64.StdEncoding.DecodeString(strings.TrimPrefix(strings.TrimSpace(string(out)), "whpk_"))
		if err != nil || derr != nil || len(raw) != ed25519.PublicKeySize {
			t.Fatalf("sign public-key --host %s: %v %q", host, err, out)
		}
		return raw
	}
	pa, pb, ps := pubOf(a.Host()), pubOf(b.Host()), pubOf(shared.Host())
	if pa.Equal(pb) {
		t.Fatal("two partners were given the same public key")
	}
	c := hp.Client()
	for _, rc := range []*Receiver{a, b, shared} {
		if status, _ := hp.Post(c, rc.URL+"/hook", []byte(`{"n":1}`), http.Header{"Content-Type": {"application/json"}}); status != http.StatusAccepted {
			t.Fatalf("webhook to %s: status %d", rc.Host(), status)
		}
	}
	verifies := func(rc *Receiver) []string {
		rc.WaitFor(t, 30*time.Second, "the delivery", func(as []Arrival) bool { return Delivered2xx(as) >= 1 })
		arr := rc.Arrivals()[0]
		msg := []byte(arr.Header.Get("Webhook-Id") + "." + arr.Header.Get("Webhook-Timestamp") + "." + string(arr.Body))
		sig, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(arr.Header.Get("Webhook-Signature"), "v1a,"))
		var by []string
		for name, pub := range map[string]ed25519.PublicKey{"a": pa, "b": pb, "shared": ps} {
			if ed25519.Verify(pub, msg, sig) {
				by = append(by, name)
			}
		}
		return by
	}
	for rc, want := range map[*Receiver]string{a: "a", b: "b", shared: "shared"} {
		if got := verifies(rc); len(got) != 1 || got[0] != want {
			t.Errorf("the delivery to %s verifies with %v, want %s's key alone", rc.Host(), got, want)
		}
	}
}
