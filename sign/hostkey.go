package sign

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"sync"
)

// hostKeyLabel separates the derivation of per-host keys from any other
// use of the master key.
const hostKeyLabel = "hookpace standard-webhooks-v1a host key\x00"

// HostKey is the Ed25519 key that signs for host when each partner has a
// key of its own: its seed is HMAC-SHA256(master's seed, label || host),
// so it is the same at every start and on every replica that holds the
// master key, and one partner's public key verifies nothing sent to
// another. host is the destination as hookpace names hosts (lower case,
// no default port: api.partner.example, or host:port).
func HostKey(master ed25519.PrivateKey, host string) ed25519.PrivateKey {
	m := hmac.New(sha256.New, master.Seed())
	m.Write([]byte(hostKeyLabel))
	m.Write([]byte(host))
	return ed25519.NewKeyFromSeed(m.Sum(nil))
}

// hostKeys caches each host's derived keys (one per master key: two
// during a rotation). A host's keys are made at its first signature.
type hostKeys struct {
	masters []ed25519.PrivateKey
	byHost  sync.Map // host -> []ed25519.PrivateKey
}

func (hk *hostKeys) of(host string) []ed25519.PrivateKey {
	if ks, ok := hk.byHost.Load(host); ok {
		return ks.([]ed25519.PrivateKey)
	}
	ks := make([]ed25519.PrivateKey, len(hk.masters))
	for i, m := range hk.masters {
		ks[i] = HostKey(m, host)
	}
	got, _ := hk.byHost.LoadOrStore(host, ks)
	return got.([]ed25519.PrivateKey)
}
