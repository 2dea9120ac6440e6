package server

import (
	"log/slog"
	"path/filepath"
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
		names, err := mitm.ParseNames(wanted) // config checked them
		if err != nil {
			return false, err
		}
		switch {
		case names.Empty():
			ca = nil
		case t.own && t.ca != nil && len(t.ca.Uncovered(wanted)) == 0:
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
				t.notice = "CA re-issued " + time.Now().UTC().Format(time.RFC3339) + " to vouch for " + names.String() +
					": apps must re-read " + bundle + " for the new names (" + trustRereads + ")"
				t.log.Warn("mitm: CA re-issued with the same key for new names: apps must re-read the trust bundle for them; the names it had keep verifying",
					"names", names.String(), "bundle", bundle, "rereads", trustRereads)
			}
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
	roots, _ := mitm.SystemRoots()
	if err := mitm.WriteTrust(cfg.TrustDir(), ca, roots); err != nil {
		return changed, err
	}
	t.written = true
	return changed, nil
}

// CA is the CA in force, or nil.
func (t *intercept) CA() *mitm.CA {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ca
}

// status is what the status page and hookpace status show.
func (t *intercept) status(cfg *config.Config, tunnels []proxy.TunnelStat) *admin.HTTPS {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := &admin.HTTPS{CA: "none", Uncovered: t.uncovered, Notice: t.notice, Tunnels: []admin.Tunnel{}}
	if t.ca != nil {
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
