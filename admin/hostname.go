package admin

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/hookpace/hookpace/hostname"
)

// DefaultMaxPaused bounds the hosts that are paused and not in the config
// (Options.MaxPaused), so that the API cannot be used to grow state
// without end.
const DefaultMaxPaused = 1000

// HostKey normalises a host given to pause or resume to the queue key the
// proxy uses: lower case, no trailing dot, the port only when it is not the
// scheme's default. A URL ("https://partner.example/hook") becomes its
// host; anything that is not a host name, an IP address or host:port is an
// error.
func HostKey(s string) (string, error) {
	in := strings.TrimSpace(s)
	if in == "" {
		return "", fmt.Errorf("empty host")
	}
	scheme := ""
	if strings.Contains(in, "://") {
		u, err := url.Parse(in)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return "", fmt.Errorf("bad host %s: want a host name, host:port or an http(s) URL", quote(s))
		}
		scheme, in = u.Scheme, u.Host
	}
	host, port := in, ""
	if h, p, err := net.SplitHostPort(in); err == nil {
		host, port = h, p
	} else if strings.HasPrefix(in, "[") && strings.HasSuffix(in, "]") {
		host = in[1 : len(in)-1]
	}
	if len(host) > 1 {
		host = strings.TrimSuffix(host, ".")
	}
	// Checked before it is lower-cased, as everywhere (see hostname.Normalize).
	if _, _, err := hostname.Parse(host); err != nil {
		return "", fmt.Errorf("bad host %s: want a host name, host:port or an http(s) URL", quote(s))
	}
	host = strings.ToLower(host)
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return "", fmt.Errorf("bad port in %s", quote(s))
		}
	}
	if port == "" || (port == "80" && scheme == "http") || (port == "443" && scheme == "https") {
		return host, nil
	}
	return net.JoinHostPort(host, port), nil
}
