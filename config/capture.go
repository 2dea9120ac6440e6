package config

// CaptureConfig is the capture listener: connections the kernel redirected
// to it (iptables REDIRECT, see `hookpace capture rules`) are served as if
// the app had sent them to the proxy: TLS as a CONNECT to the ClientHello's
// name, plain HTTP as proxy-form requests to their Host.
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
