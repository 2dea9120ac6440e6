package server

import "github.com/hookpace/hookpace/config"

// What one client, or a flood of them, can take of the proxy listener is
// bounded: its open connections (proxy.max_connections, so that the admin
// listener, the spool and deliveries always have file descriptors; see
// package connlimit) and the time a request's body may take
// (proxy.body_timeout).

// maxConnections is proxy.max_connections, or when 0 half the open-file
// limit, between 16 and 16384.
func maxConnections(cfg *config.Config) int {
	if n := cfg.Proxy.MaxConnections; n > 0 {
		return n
	}
	return min(max(openFileLimit()/2, 16), 16384)
}
