package server

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"

	"github.com/hookpace/hookpace/admin"
	"github.com/hookpace/hookpace/config"
)

// adminGuard builds the admin API's access checks for the bound listeners.
// A token file that cannot be read stops the start; an admin listener off
// loopback without a token is refused by config validation, and with
// admin.insecure_no_auth it is allowed with a warning at every start.
func adminGuard(log *slog.Logger, cfg *config.Config, ln net.Listener) (*admin.Guard, error) {
	acc := admin.Access{Hosts: cfg.AdminAccess.Hosts, Addrs: []string{ln.Addr().String(), cfg.Admin}}
	if f := cfg.AdminAccess.TokenFile; f != "" {
		t, err := config.ReadToken(f)
		if err != nil {
			return nil, fmt.Errorf("admin.token_file: %w", err)
		}
		acc.Token = t
	}
	if acc.Token == "" && !config.AdminLoopback(cfg.Admin) {
		if !cfg.AdminAccess.InsecureNoAuth {
			return nil, fmt.Errorf("admin %s is not a loopback address: set admin.token_file, or admin.insecure_no_auth: true", cfg.Admin)
		}
		log.Warn("!!! INSECURE: the admin API listens on a non-loopback address without a token (admin.insecure_no_auth): "+
			"anyone who can reach it can pause hosts and purge dead letters !!!", "admin", ln.Addr().String())
	}
	return admin.NewGuard(acc), nil
}

// adminHandler is the admin API for the running process.
func adminHandler(o admin.Options, current *atomic.Pointer[config.Config]) http.Handler {
	o.Configured = func(host string) bool {
		_, ok := current.Load().Hosts[host]
		return ok
	}
	return admin.Handler(o)
}
