package config

import (
	"strings"
	"testing"
	"time"
)

func TestProxySectionAndMaxHeaderBytes(t *testing.T) {
	c, err := Parse("t.yaml", []byte("proxy: {body_timeout: 5s, max_connections: 100}\nspool: {max_header_bytes: 16KiB}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Proxy.BodyTimeout.D() != 5*time.Second || c.Proxy.MaxConnections != 100 || c.Spool.MaxHeader != 16<<10 {
		t.Errorf("resolved %+v, max_header_bytes %v", c.Proxy, c.Spool.MaxHeader)
	}
	d := Default()
	if d.Proxy.BodyTimeout.D() != 30*time.Second || d.Proxy.MaxConnections != 0 || d.Spool.MaxHeader != 64<<10 {
		t.Errorf("defaults %+v, max_header_bytes %v", d.Proxy, d.Spool.MaxHeader)
	}
	for yaml, want := range map[string]string{
		"proxy: {body_timeout: 0s}\n":        "t.yaml:1: proxy.body_timeout: must be positive",
		"proxy: {max_connections: -1}\n":     "t.yaml:1: proxy.max_connections: must be 0",
		"proxy: {max_conns: 1}\n":            `unknown field "max_conns"`,
		"spool: {max_header_bytes: 100}\n":   "t.yaml:1: spool.max_header_bytes: must be between 1KiB and 1MiB",
		"spool:\n  max_header_bytes: 2MiB\n": "t.yaml:2: spool.max_header_bytes",
	} {
		if _, err := Parse("t.yaml", []byte(yaml)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", yaml, err, want)
		}
	}
	old, new := Default(), Default()
	new.Proxy.MaxConnections, new.Proxy.BodyTimeout = 10, Duration(time.Second)
	if got := RestartRequired(old, new); len(got) != 1 || got[0] != "proxy.max_connections" {
		t.Errorf("RestartRequired = %v, want only proxy.max_connections (body_timeout applies live)", got)
	}
}
