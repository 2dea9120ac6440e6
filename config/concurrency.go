package config

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// Concurrency per host is a number (a fixed cap on attempts in flight)
// or "auto": hookpace finds the partner's capacity from latency and
// errors (package pacer, adaptive.go), between 1 and max_concurrency.

// ConcurrencyAuto is the value of concurrency that turns it adaptive.
const ConcurrencyAuto = "auto"

// DefaultMaxConcurrency is max_concurrency's default.
const DefaultMaxConcurrency = 64

// autoOrInt is concurrency as written: an integer or "auto".
type autoOrInt struct {
	N    int
	Auto bool
}

func (c *autoOrInt) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && strings.EqualFold(n.Value, ConcurrencyAuto) {
		c.Auto = true
		return nil
	}
	if err := n.Decode(&c.N); err != nil {
		return fmt.Errorf("want an integer or %s, got %s", ConcurrencyAuto, quoteNode(n))
	}
	return nil
}

// resolveConcurrency applies concurrency and max_concurrency of r to h.
func resolveConcurrency(p *problems, path func(string) string, r *rawHost, h *HostConfig) {
	field(p, path("max_concurrency"), r.MaxConcurrency, &h.MaxConcurrency, atLeast(1))
	var v autoOrInt
	if !field(p, path("concurrency"), r.Concurrency, &v, func(v autoOrInt) error {
		if v.Auto {
			return nil
		}
		return atLeast(1)(v.N)
	}) {
		return
	}
	h.AutoConcurrency = v.Auto
	if !v.Auto {
		h.Concurrency = v.N
	}
}

// ConcurrencyCap is the most attempts in flight h allows: max_concurrency
// with concurrency auto, else concurrency.
func (h HostConfig) ConcurrencyCap() int {
	if h.AutoConcurrency {
		return h.MaxConcurrency
	}
	return h.Concurrency
}

// ConcurrencyText is concurrency as written: "4", or "auto (max 64)".
func (h HostConfig) ConcurrencyText() string {
	if h.AutoConcurrency {
		return fmt.Sprintf("%s (max %d)", ConcurrencyAuto, h.MaxConcurrency)
	}
	return fmt.Sprint(h.Concurrency)
}
