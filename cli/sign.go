package cli

import (
	"crypto/ed25519"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/hookpace/hookpace/hostname"
	"github.com/hookpace/hookpace/server"
	"github.com/hookpace/hookpace/sign"
)

// signCmd is hookpace sign public-key.
func signCmd(args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "public-key" {
		return usageError{"hookpace sign public-key --config FILE --host HOST"}
	}
	return publicKey(args[1:], stdout)
}

// publicKey prints the Standard Webhooks public key ("whpk_…") of each
// Ed25519 key that signs for a host, one a line (two during a rotation):
// the host's own key, derived from the block's, where the block signs
// each host with its own (per_host),
// creating hookpace's own key if the host uses it and it does not exist
// yet, so that partners can have the key before the first webhook.
func publicKey(args []string, stdout io.Writer) error {
	fs := newFlags("sign public-key")
	path := fs.String("config", "", "config file (YAML); $HOOKPACE_CONFIG if empty")
	host := fs.String("host", "", "the partner's host, as in the webhook URLs (api.partner.example or host:port)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{"unexpected argument " + fs.Arg(0)}
	}
	if *host == "" {
		return usageError{"--host is required"}
	}
	if *path == "" {
		*path = os.Getenv("HOOKPACE_CONFIG")
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		return err
	}
	key, hc := cfg.Lookup(strings.ToLower(strings.TrimSuffix(*host, ".")))
	if key == "" {
		key = "defaults"
	}
	if hc.Sign == nil || hc.Sign.Scheme != sign.StandardWebhooksV1a {
		scheme := "none"
		if hc.Sign != nil {
			scheme = hc.Sign.Scheme
		}
		return fmt.Errorf("%s (settings of %s) signs with scheme %s, not %s: it has no public key", *host, key, scheme, sign.StandardWebhooksV1a)
	}
	keys, err := server.SigningKeys(cfg, hc.Sign)
	if err != nil {
		return err
	}
	name := partnerHost(*host)
	for _, k := range keys {
		if hc.Sign.PerHost {
			k = sign.HostKey(k, name)
		}
		fmt.Fprintln(stdout, sign.PublicKey(k.Public().(ed25519.PublicKey)))
	}
	return nil
}

// partnerHost names host as the webhooks' URLs make it at delivery
// (hostname.Key): lower case, no trailing dot, no default port.
func partnerHost(host string) string {
	h := hostname.Key(&url.URL{Scheme: "https", Host: strings.TrimSpace(host)})
	return strings.TrimSuffix(h, ":80")
}
