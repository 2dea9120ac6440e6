package sign

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Standard Webhooks' prefixes of an asymmetric secret (private) key and
// of its public key.
const (
	SecretKeyPrefix = "whsk_"
	PublicKeyPrefix = "whpk_"
)

// PublicKey is pub as Standard Webhooks writes it for receivers:
// "whpk_" + base64 of the 32-byte Ed25519 public key.
func PublicKey(pub ed25519.PublicKey) string {
	return PublicKeyPrefix + base64.StdEncoding.EncodeToString(pub)
}

// ParsePublicKey reads a "whpk_…" public key.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(strings.TrimSpace(s), PublicKeyPrefix))
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, errors.New(`not "whpk_" followed by base64 of a 32-byte Ed25519 public key`)
	}
	return ed25519.PublicKey(b), nil
}

// ReadKey reads an Ed25519 private key from the file at path: PEM
// ("PRIVATE KEY", PKCS #8, as openssl genpkey -algorithm ed25519 writes
// it) or Standard Webhooks' "whsk_" + base64 of the 32-byte seed or the
// 64-byte key.
func ReadKey(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	k, err := parseKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

func parseKey(b []byte) (ed25519.PrivateKey, error) {
	if blk, _ := pem.Decode(b); blk != nil {
		if blk.Type != "PRIVATE KEY" {
			return nil, fmt.Errorf("PEM block %q, want PRIVATE KEY (PKCS #8 Ed25519)", blk.Type)
		}
		k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("PKCS #8: %w", err)
		}
		ek, ok := k.(ed25519.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("a %T key, want Ed25519", k)
		}
		return ek, nil
	}
	s := strings.TrimSpace(string(b))
	if !strings.HasPrefix(s, SecretKeyPrefix) {
		return nil, errors.New(`neither a PEM private key nor "whsk_" followed by base64`)
	}
	raw, err := base64.StdEncoding.DecodeString(s[len(SecretKeyPrefix):])
	switch {
	case err != nil:
		return nil, errors.New(`"whsk_" not followed by base64`)
	case len(raw) == ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(raw), nil
	case len(raw) == ed25519.PrivateKeySize:
		k := ed25519.NewKeyFromSeed(raw[:ed25519.SeedSize])
		if !k.Public().(ed25519.PublicKey).Equal(ed25519.PublicKey(raw[ed25519.SeedSize:])) {
			return nil, errors.New("the 64-byte key's public half does not match its seed")
		}
		return k, nil
	}
	return nil, fmt.Errorf("whsk_ key of %d bytes, want 32 (seed) or 64", len(raw))
}

// LoadOrCreateKey reads the Ed25519 key at path, creating it first (mode
// 0600, in a directory of mode 0700) if there is none. Creation is once
// and for all: two processes racing get the same key, the second reading
// what the first linked into place. What it creates belongs to the owner
// of the nearest directory above path that exists (the spool directory's
// owner, for hookpace's own key), so that a command run as root before
// hookpace's first start creates a key the user that runs hookpace can
// read.
func LoadOrCreateKey(path string) (ed25519.PrivateKey, error) {
	k, err := ReadKey(path)
	if errors.Is(err, fs.ErrPermission) {
		return nil, fmt.Errorf("%w (it must be readable by the user that runs hookpace: chown it to that user)", err)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return k, err
	}
	dir := filepath.Dir(path)
	own := ownerOf(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create signing key: %w", err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("create signing key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("create signing key: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".key-*")
	if err != nil {
		return nil, fmt.Errorf("create signing key: %w", err)
	}
	defer os.Remove(tmp.Name())
	werr := pem.Encode(tmp, &pem.Block{Type: "PRIVATE KEY", Bytes: der})
	if werr == nil {
		werr = own.chown(tmp.Name())
	}
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return nil, fmt.Errorf("create signing key: %w", werr)
	}
	// CreateTemp made it 0600; Link fails if another process won.
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("create signing key: %w", err)
	}
	return ReadKey(path)
}
