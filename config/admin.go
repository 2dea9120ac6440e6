package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/hookpace/hookpace/hostname"
	"gopkg.in/yaml.v3"
)

// AdminConfig is who may use the admin API, besides its address
// (Config.Admin). The file takes either the address alone
// (`admin: 127.0.0.1:9090`) or a mapping:
//
//	admin:
//	  listen: 0.0.0.0:9090
//	  hosts: [hookpace.ops.svc]
//	  token_file: /run/secrets/hookpace-admin-token
type AdminConfig struct {
	Hosts          []string // Host header names served besides loopback and the listener's own addresses
	TokenFile      string   // file holding the bearer token; "" = no token
	InsecureNoAuth bool     // allow a non-loopback admin address without a token
}

type rawAdmin struct {
	Listen         opt[string]        `yaml:"listen"`
	Hosts          opt[[]opt[string]] `yaml:"hosts"`
	TokenFile      opt[string]        `yaml:"token_file"`
	InsecureNoAuth opt[bool]          `yaml:"insecure_no_auth"`
}

var adminFields = map[string]bool{"listen": true, "hosts": true, "token_file": true, "insecure_no_auth": true}

// decodeAdmin reads the admin node: a scalar address or a mapping.
func decodeAdmin(n *yaml.Node, doc *docIndex, p *problems) *rawAdmin {
	r := &rawAdmin{}
	n = deref(n)
	switch {
	case n.Kind == 0 || n.ShortTag() == "!!null":
	case n.Kind == yaml.ScalarNode:
		r.Listen.UnmarshalYAML(n)
	case n.Kind == yaml.MappingNode:
		checkKnownFields(n, "admin", adminFields, map[*yaml.Node]bool{}, p)
		var te *yaml.TypeError
		if err := n.Decode(r); errors.As(err, &te) {
			for _, s := range te.Errors {
				p.addDecodeError(doc, s)
			}
		} else if err != nil {
			p.add(n.Line, "admin", "%v", err)
		}
	default:
		p.add(n.Line, "admin", "want host:port or a mapping (listen, hosts, token_file, insecure_no_auth), got %s", quoteNode(n))
	}
	return r
}

// resolveAdmin checks the admin section into c.Admin and c.AdminAccess.
func resolveAdmin(p *problems, r *rawAdmin, c *Config) {
	field(p, "admin", r.Listen, &c.Admin, checkListen)
	list(p, "admin.hosts", r.Hosts, &c.AdminAccess.Hosts, checkAdminHost, false)
	for i, h := range c.AdminAccess.Hosts {
		c.AdminAccess.Hosts[i] = strings.TrimSuffix(strings.ToLower(h), ".")
	}
	if len(c.AdminAccess.Hosts) == 0 {
		c.AdminAccess.Hosts = nil
	}
	field(p, "admin.token_file", r.TokenFile, &c.AdminAccess.TokenFile, nil)
	c.AdminAccess.TokenFile = strings.TrimSpace(c.AdminAccess.TokenFile)
	field(p, "admin.insecure_no_auth", r.InsecureNoAuth, &c.AdminAccess.InsecureNoAuth, nil)
	line := firstLine(r.Listen.Line, r.TokenFile.Line, r.InsecureNoAuth.Line)
	if !AdminLoopback(c.Admin) && c.AdminAccess.TokenFile == "" && !c.AdminAccess.InsecureNoAuth {
		p.add(line, "admin", "%s is not a loopback address: set admin.token_file (a bearer token), "+
			"or admin.insecure_no_auth: true to serve it without one", c.Admin)
	}
}

func checkAdminHost(s string) error {
	if _, err := netip.ParseAddr(s); err == nil {
		return nil
	}
	return hostname.Check(strings.TrimSuffix(s, "."))
}

// AdminLoopback reports whether the admin address listens on loopback
// only: 127.0.0.0/8, ::1 or "localhost". An empty host (":9090") listens
// everywhere.
func AdminLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// ReadToken reads a bearer token file (server.LoadFiles reads
// admin.token_file with it, the CLI its --token-file): its content less surrounding
// white space, which must be at least 16 characters of printable ASCII.
func ReadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	t := strings.TrimSpace(string(b))
	if len(t) < 16 {
		return "", fmt.Errorf("%s: token must be at least 16 characters, got %d", path, len(t))
	}
	for _, c := range t {
		if c <= ' ' || c > '~' {
			return "", fmt.Errorf("%s: token must be printable ASCII without spaces", path)
		}
	}
	return t, nil
}
