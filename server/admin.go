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

// adminGuard builds the admin API's access checks for the bound listeners
// with token, admin.token_file's (LoadFiles read it). An admin listener
// off loopback without a token is refused by config validation, and with
// admin.insecure_no_auth it is allowed with a warning at every start.
func adminGuard(log *slog.Logger, cfg *config.Config, token string, ln net.Listener) (*admin.Guard, error) {
	acc := admin.Access{Hosts: cfg.AdminAccess.Hosts, Addrs: []string{ln.Addr().String(), cfg.Admin}, Token: token}
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
