package config

import (
	"slices"
	"strconv"
	"strings"
)

// CaptureConfig is the capture listener: connections the kernel redirected
// to it (iptables REDIRECT, see `hookpace capture rules`) that can carry a
// webhook are served as if the app had sent them to the proxy: TLS as a
// CONNECT to the ClientHello's name, plain HTTP as proxy-form requests to
// their Host; the rest are spliced to their original destination.
type CaptureConfig struct {
	Listen string // host:port; "" = off
}

type rawCapture struct {
	Listen opt[string] `yaml:"listen"`
}

func resolveCapture(p *problems, r *rawCapture, c *CaptureConfig) {
	field(p, "capture.listen", r.Listen, &c.Listen, func(v string) error {
		if v == "" {
			return nil
		}
		return checkListen(v)
	})
}

// HostPorts are the destination ports that hosts keys name explicitly
// ("hooks.example:8443"), sorted and without repeats: a partner there is
// captured only if the capture rules redirect that port too.
func (c *Config) HostPorts() []uint16 {
	var ports []uint16
	for k := range c.Hosts {
		i := strings.LastIndexByte(k, ':')
		if i < 0 || strings.HasSuffix(k, "]") {
			continue
		}
		if p, err := strconv.ParseUint(k[i+1:], 10, 16); err == nil && p != 0 && !slices.Contains(ports, uint16(p)) {
			ports = append(ports, uint16(p))
		}
	}
	slices.Sort(ports)
	return ports
}
