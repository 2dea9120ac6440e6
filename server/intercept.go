package server

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hookpace/hookpace/admin"
	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/mitm"
	"github.com/hookpace/hookpace/proxy"
)

// trustRereads says which clients pick up a changed trust bundle by
// themselves, for the log and the status page.
const trustRereads = "curl reads it on every run, Python requests on every new connection, httpx per Client; " +
	"Go, Node and Java read it once at start: restart them"

// intercept owns the CA that intercepts CONNECT: the operator's, or
// hookpace's own, kept in the spool directory and re-issued when the
// config names hosts it does not cover. It writes the public trust files
// and says what it did.
type intercept struct {
	log *slog.Logger

	mu        sync.Mutex
	ca        *mitm.CA
	own       bool
	uncovered []string
	notice    string
	written   bool // the trust files were written once
}

// apply makes the CA match cfg (operator is LoadFiles' CA, nil without
// mitm.ca_cert) and reports whether it changed. The first call always
// writes the trust files; later ones when the CA changed.
func (t *intercept) apply(cfg *config.Config, operator *mitm.CA) (changed bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ca, own := operator, operator == nil
	wanted := cfg.MITMNames()
	if own {
		names, err := ownNames(cfg)
		if err != nil {
			return false, err
		}
		switch {
		case names.Empty():
			ca = nil
		case t.own && t.ca != nil && names.Open && t.ca.Is(names):
			ca = t.ca // the open-world CA in force: its bytes never change with the hosts
		case t.own && t.ca != nil && !names.Open && len(t.ca.Uncovered(wanted)) == 0:
			ca = t.ca // the CA in force covers the names: nothing to do
		default:
			var outcome mitm.Outcome
			ca, outcome, err = mitm.Ensure(cfg.OwnCADir(), names, cfg.MITM.CacheSize)
			if err != nil {
				return false, err
			}
			cert, _ := mitm.OwnPaths(cfg.OwnCADir())
			bundle := filepath.Join(cfg.TrustDir(), mitm.TrustBundle)
			switch outcome {
			case mitm.Created:
				t.log.Info("mitm: created hookpace's own CA; apps trust it through the bundle", "names", names.String(),
					"ca_cert", cert, "bundle", bundle)
			case mitm.Reissued:
				if names.Open {
					t.notice = "CA re-issued " + time.Now().UTC().Format(time.RFC3339) + " as the open-world CA (" + names.String() +
						"): apps must re-read " + bundle + " (" + trustRereads + ")"
					t.log.Warn("mitm: CA re-issued with the same key as the open-world CA (mitm.scope or mitm.exclude changed): apps must re-read the trust bundle",
						"names", names.String(), "bundle", bundle, "rereads", trustRereads)
					break
				}
				t.notice = "CA re-issued " + time.Now().UTC().Format(time.RFC3339) + " to vouch for " + names.String() +
					": apps must re-read " + bundle + " for the new names (" + trustRereads + ")"
				t.log.Warn("mitm: CA re-issued with the same key for new names: apps must re-read the trust bundle for them; the names it had keep verifying",
					"names", names.String(), "bundle", bundle, "rereads", trustRereads)
			}
		}
	}
	if !own && ca != nil {
		if _, constrained := ca.Names(); !constrained {
			t.log.Warn("mitm: your CA (mitm.ca_cert) has no name constraints: whoever holds its key can impersonate any site and any IP address to every app that trusts it; "+
				"make one with hookpace ca init --hosts, or let hookpace use its own open-world CA (no mitm.ca_cert, defaults.connect: mitm), which never vouches for IPs or cluster names",
				"ca_cert", cfg.MITM.CACert)
		}
	}
	changed = ca != t.ca
	t.ca, t.own = ca, own
	t.uncovered = nil
	if ca != nil {
		t.uncovered = ca.Uncovered(wanted)
	}
	if len(t.uncovered) > 0 {
		t.log.Warn("mitm: the CA cannot vouch for these hosts: their CONNECTs pass through unpaced", "hosts", strings.Join(t.uncovered, ", "))
	}
	if t.written && !changed {
		return false, nil
	}
	// The bundle replaces an app's roots (SSL_CERT_FILE): it carries the
	// system's, the extra roots hookpace itself trusts (tls.ca_file, a
	// corporate CA the apps trust too) and the CA.
	roots, _ := mitm.SystemRoots()
	if cfg.TLS.CAFile != "" {
		extra, err := os.ReadFile(cfg.TLS.CAFile)
		if err != nil {
			return changed, fmt.Errorf("tls.ca_file: %w", err)
		}
		roots = append(append(slices.Clip(roots), '\n'), extra...)
	}
	if err := mitm.WriteTrust(cfg.TrustDir(), ca, roots); err != nil {
		return changed, err
	}
	t.written = true
	return changed, nil
}

// ownNames are the constraints of hookpace's own CA under cfg: the
// open-world CA's, or the names the config lists (config checked them).
func ownNames(cfg *config.Config) (mitm.Names, error) {
	if cfg.MITMOpen() {
		return mitm.OpenNames(cfg.MITM.Exclude)
	}
	return mitm.ParseNames(cfg.MITMNames())
}

// CA is the CA in force, or nil.
func (t *intercept) CA() *mitm.CA {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ca
}

// status is what the status page and hookpace status show.
func (t *intercept) status(cfg *config.Config, tunnels []proxy.TunnelStat, forwarded []proxy.ForwardStat) *admin.HTTPS {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := &admin.HTTPS{CA: "none", Uncovered: t.uncovered, Notice: t.notice, Tunnels: []admin.Tunnel{}, Forwarded: []admin.Forward{}}
	for _, f := range forwarded {
		h.Forwarded = append(h.Forwarded, admin.Forward{Host: f.Host, Count: f.Count, Last: f.Last})
	}
	if t.ca != nil {
		if names, _ := t.ca.Names(); names.Open {
			h.Open, h.Excluded = true, names.Exclude
		}
		h.CA, h.CACert = "operator", cfg.MITM.CACert
		if t.own {
			h.CA, h.CACert = "own", filepath.Join(cfg.TrustDir(), mitm.TrustCert)
		}
		if names, constrained := t.ca.Names(); constrained {
			h.Names = strings.Split(names.String(), ", ")
		}
	}
	h.Bundle = filepath.Join(cfg.TrustDir(), mitm.TrustBundle)
	for _, s := range tunnels {
		h.Tunnels = append(h.Tunnels, admin.Tunnel{Host: s.Host, Mode: s.Mode, Count: s.Count, Last: s.Last, Reason: s.Reason})
	}
	return h
}
