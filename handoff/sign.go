package handoff

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// A hand-off's claim to keep its id is authenticated: any client the
// proxy lets in could otherwise name another replica's spool and its next
// sequence, and give its own webhook an id that receivers de-duplicate
// on. The sender signs each hand-off with a secret the fleet shares
// (shutdown.handoff_secret_file, on both ends): an HMAC-SHA256 over the
// claim (the Header value), the method, the destination host and the
// body, sent in SignatureHeader. A receiver keeps the id only when the
// signature checks.

// SignatureHeader carries a hand-off's signature: "v1=" and 64 hex digits.
const SignatureHeader = "X-Hookpace-Handoff-Signature"

// MinSecret is the shortest secret accepted, in bytes.
const MinSecret = 32

// ReadSecret reads a hand-off secret file (a mounted Secret): its content
// less surrounding white space, at least MinSecret bytes.
func ReadSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := strings.TrimSpace(string(b))
	if len(s) < MinSecret {
		return nil, fmt.Errorf("%s: %d bytes, want at least %d (say, openssl rand -hex 32)", path, len(s), MinSecret)
	}
	return []byte(s), nil
}

// Sign returns the SignatureHeader value for a hand-off of a webhook with
// the given claim (the Header value), method, destination host key and
// body.
func Sign(secret []byte, claim, method, host string, body []byte) string {
	return "v1=" + hex.EncodeToString(mac(secret, claim, method, host, body))
}

// ErrUnsigned and ErrBadSignature are why Verify refuses a claim.
var (
	ErrUnsigned     = errors.New("hand-off claim without " + SignatureHeader)
	ErrBadSignature = errors.New("hand-off claim whose " + SignatureHeader + " does not check (another secret, or a forged claim)")
)

// Verify checks a hand-off's signature (the SignatureHeader value sig).
func Verify(secret []byte, sig, claim, method, host string, body []byte) error {
	if sig == "" {
		return ErrUnsigned
	}
	got, err := hex.DecodeString(strings.TrimPrefix(sig, "v1="))
	if err != nil || !strings.HasPrefix(sig, "v1=") || !hmac.Equal(got, mac(secret, claim, method, host, body)) {
		return ErrBadSignature
	}
	return nil
}

func mac(secret []byte, claim, method, host string, body []byte) []byte {
	return macOf(secret, "hookpace-handoff-v1", []string{claim, method, host}, body)
}

// macOf is an HMAC-SHA256 over a domain (what is signed), fields and a
// body, each length-prefixed, so that no two different tuples hash alike.
func macOf(secret []byte, domain string, fields []string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	for _, s := range append([]string{domain}, fields...) {
		fmt.Fprintf(h, "%d:%s\n", len(s), s)
	}
	fmt.Fprintf(h, "%d:", len(body))
	h.Write(body)
	return h.Sum(nil)
}

func hexMAC(secret []byte, domain string, fields []string, body []byte) string {
	return hex.EncodeToString(macOf(secret, domain, fields, body))
}

// macEqual compares two "v1=" signatures in constant time.
func macEqual(got, want string) bool {
	return hmac.Equal([]byte(got), []byte(want))
}
