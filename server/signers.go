package server

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/sign"
)

// signers builds a signer for each sign block of cfg (defaults', the
// hosts' and the inbound routes'; a host that inherits defaults' shares
// its block), reading its secrets.
func signers(cfg *config.Config) (map[*config.Signing]*sign.Signer, error) {
	out := map[*config.Signing]*sign.Signer{}
	var errs []error
	blocks := []*config.Signing{cfg.Defaults.Sign}
	for _, k := range slices.Sorted(maps.Keys(cfg.Hosts)) {
		blocks = append(blocks, cfg.Hosts[k].Sign)
	}
	for _, rt := range cfg.Inbound {
		blocks = append(blocks, rt.Sign)
	}
	for _, sc := range blocks {
		if _, done := out[sc]; done || sc == nil {
			continue
		}
		s, err := signer(cfg, sc)
		if err != nil {
			errs = append(errs, err)
		}
		out[sc] = s
	}
	return out, errors.Join(errs...)
}

// signer reads the secrets (and keys) of sc and builds its signer.
func signer(cfg *config.Config, sc *config.Signing) (*sign.Signer, error) {
	path := cfg.Path
	keys := make([][]byte, 0, len(sc.Secrets))
	var errs []error
	ed, err := SigningKeys(cfg, sc)
	if err != nil {
		errs = append(errs, err)
	}
	for _, s := range sc.Secrets {
		key, err := readSecret(sc.Scheme, s)
		if err != nil {
			errs = append(errs, &config.FieldError{File: path, Line: s.Line, Field: s.Field, Msg: err.Error()})
			continue
		}
		keys = append(keys, key)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	s, err := sign.New(sign.Options{Scheme: sc.Scheme, Secrets: keys, Keys: ed, PerHost: sc.PerHost, Header: sc.Header, Replace: sc.Replace, Prefix: sc.Prefix})
	if err != nil {
		return nil, &config.FieldError{File: path, Line: sc.Line, Field: sc.Field, Msg: err.Error()}
	}
	return s, nil
}

// SigningKeys reads the Ed25519 keys of a v1a block: its key files, or
// hookpace's own key beside the spool, created by whichever of a start,
// check-config and hookpace sign public-key comes first.
func SigningKeys(cfg *config.Config, sc *config.Signing) ([]ed25519.PrivateKey, error) {
	if sc.Scheme != sign.StandardWebhooksV1a {
		return nil, nil
	}
	if len(sc.KeyFiles) == 0 {
		k, err := sign.LoadOrCreateKey(cfg.SignKeyPath())
		if err != nil {
			return nil, &config.FieldError{File: cfg.Path, Line: sc.Line, Field: sc.Field, Msg: "hookpace's own signing key: " + err.Error()}
		}
		return []ed25519.PrivateKey{k}, nil
	}
	var out []ed25519.PrivateKey
	var errs []error
	for _, f := range sc.KeyFiles {
		k, err := sign.ReadKey(f.Name)
		if err != nil {
			errs = append(errs, &config.FieldError{File: cfg.Path, Line: f.Line, Field: f.Field, Msg: err.Error()})
			continue
		}
		out = append(out, k)
	}
	return out, errors.Join(errs...)
}

// readSecret reads one secret: for standard-webhooks "whsec_" and base64,
// for hmac-sha256 the text itself (less surrounding white space).
func readSecret(scheme string, s config.Secret) ([]byte, error) {
	var text string
	switch s.Kind {
	case "file":
		b, err := os.ReadFile(s.Name)
		if err != nil {
			return nil, err
		}
		text = strings.TrimSpace(string(b))
	case "env":
		text = strings.TrimSpace(os.Getenv(s.Name))
		if text == "" {
			return nil, fmt.Errorf("environment variable %s is not set or empty", s.Name)
		}
	}
	if scheme != sign.HMACSHA256 {
		key, err := sign.ParseSecret(text)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s, err)
		}
		return key, nil
	}
	if text == "" {
		return nil, errors.New("secret is empty")
	}
	return []byte(text), nil
}
