package cli

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/hookpace/hookpace/inject"
)

// captureFlags are hookpace inject's --capture flags.
func captureFlags(fs *flag.FlagSet, c *inject.CaptureOptions) {
	fs.BoolVar(&c.Capture, "capture", false, "add the init container "+inject.CaptureContainerName+
		" that redirects the pod's outbound TCP to hookpace's capture.listen (NET_ADMIN and NET_RAW while it runs); app containers get only the trust variables")
	fs.IntVar(&c.Port, "capture-port", c.Port, "the config's capture.listen port")
	fs.Func("capture-ports", fmt.Sprintf("destination TCP `PORTS` redirected, comma-separated (default %s)", joinInts(c.Ports)), func(s string) error {
		c.Ports = nil
		for _, p := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(p))
			if err != nil {
				return fmt.Errorf("%q is not a port", p)
			}
			c.Ports = append(c.Ports, n)
		}
		return nil
	})
	fs.StringVar(&c.Image, "capture-image", c.Image, "the init container's image: hookpace and iptables (the Dockerfile's capture-init target)")
	fs.Int64Var(&c.UID, "capture-uid", c.UID, "hookpace's uid with --capture, excluded from the redirect; no app container may run as it")
	fs.BoolVar(&c.ProxyEnv, "proxy-env", false, "with --capture, keep the proxy variables (and Java's proxy properties) for runtimes that honour them")
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
