package config

import (
	"fmt"
	"time"
)

// ProxyConfig bounds what one client can take of the proxy listener.
type ProxyConfig struct {
	// BodyTimeout is how long a request's body may take to arrive, from
	// the end of its headers; a slower one gets 408 and its connection is
	// closed.
	BodyTimeout Duration
	// MaxConnections caps the proxy listener's open connections; more
	// wait in the kernel's accept queue. 0: derived from RLIMIT_NOFILE at
	// start (half of it, between 16 and 16384), so that a flood never takes
	// the descriptors the admin listener, the spool and deliveries need.
	MaxConnections int
}

type rawProxy struct {
	BodyTimeout    opt[Duration] `yaml:"body_timeout"`
	MaxConnections opt[int]      `yaml:"max_connections"`
}

func defaultProxy() ProxyConfig {
	return ProxyConfig{BodyTimeout: Duration(30 * time.Second)}
}

func resolveProxy(p *problems, r *rawProxy, c *ProxyConfig) {
	field(p, "proxy.body_timeout", r.BodyTimeout, &c.BodyTimeout, positive)
	field(p, "proxy.max_connections", r.MaxConnections, &c.MaxConnections, func(n int) error {
		if n < 0 || n > 1<<20 {
			return fmt.Errorf("must be 0 (derived from the open-file limit) or 1..%d, got %d", 1<<20, n)
		}
		return nil
	})
}
