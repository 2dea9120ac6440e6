package config

import (
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"time"
)

// ReplicateConfig keeps a copy of every queued webhook off this node, in a
// NATS JetStream stream (spool.replicate.nats). Without it a 202 means
// "fsync'd to this node's disk" only.
type ReplicateConfig struct {
	URLs          []string // nats:// or tls:// URLs of the cluster's servers
	Replicas      int      // the stream's replicas (a Raft group of that many servers)
	Stream        string   // the stream's name; its key-value bucket is <stream>_replicas
	CredsFile     string   // a NATS credentials (JWT + NKey seed) file
	NKeyFile      string   // an NKey seed file
	User          string   // user name, with PasswordFile
	PasswordFile  string   // file holding the password of User
	TLS           bool     // TLS to the servers (a tls:// URL says so too)
	CAFile        string   // the CA that signed the servers' certificates; "" = the system's
	CertFile      string   // client certificate, with KeyFile
	KeyFile       string   // client certificate's key
	OnUnavailable string   // "refuse" (503 when the stream cannot take a write) or "local"
	AdoptAfter    Duration // a replica silent this long has its queue adopted by a live one
	Timeout       Duration // per publish round and per request
	// Embedded runs a NATS server inside this replica, clustered with
	// the other replicas' (spool.replicate.nats.embedded); nil: none.
	// URLs, if any, are then further servers to fall back to.
	Embedded *EmbeddedNATS
}

// EmbeddedNATS is a nats-server run in-process, with JetStream on this
// replica's volume, clustered with its peers on a port of its own.
type EmbeddedNATS struct {
	Peers         []string // host:port of every replica's cluster listener, this one's included
	Listen        string   // client listener (this replica's own connection, and others')
	ClusterListen string   // cluster (route) listener; the peers name it
	StoreDir      string   // JetStream's store; "" = <spool.dir>/nats
	Cluster       string   // the cluster's name
}

// Unavailable modes.
const (
	UnavailableRefuse = "refuse"
	UnavailableLocal  = "local"
)

// Enabled reports whether replication is configured.
func (r ReplicateConfig) Enabled() bool { return len(r.URLs) > 0 || r.Embedded != nil }

type rawReplicate struct {
	NATS rawNATS `yaml:"nats"`
}

type rawNATS struct {
	URLs          opt[[]opt[string]] `yaml:"urls"`
	Replicas      opt[int]           `yaml:"replicas"`
	Stream        opt[string]        `yaml:"stream"`
	CredsFile     opt[string]        `yaml:"creds_file"`
	NKeyFile      opt[string]        `yaml:"nkey_file"`
	User          opt[string]        `yaml:"user"`
	PasswordFile  opt[string]        `yaml:"password_file"`
	TLS           opt[bool]          `yaml:"tls"`
	CAFile        opt[string]        `yaml:"ca_file"`
	CertFile      opt[string]        `yaml:"cert_file"`
	KeyFile       opt[string]        `yaml:"key_file"`
	OnUnavailable opt[string]        `yaml:"on_unavailable"`
	AdoptAfter    opt[Duration]      `yaml:"adopt_after"`
	Timeout       opt[Duration]      `yaml:"timeout"`
	Embedded      *rawEmbedded       `yaml:"embedded"`
}

type rawEmbedded struct {
	Peers         opt[[]opt[string]] `yaml:"peers"`
	Listen        opt[string]        `yaml:"listen"`
	ClusterListen opt[string]        `yaml:"cluster_listen"`
	StoreDir      opt[string]        `yaml:"store_dir"`
	Cluster       opt[string]        `yaml:"cluster"`
}

func defaultReplicate() ReplicateConfig {
	return ReplicateConfig{Replicas: 3, Stream: "hookpace", OnUnavailable: UnavailableRefuse,
		AdoptAfter: Duration(30 * time.Second), Timeout: Duration(2 * time.Second)}
}

func resolveReplicate(p *problems, raw *rawReplicate, r *ReplicateConfig) {
	const at = "spool.replicate.nats."
	n := &raw.NATS
	list(p, at+"urls", n.URLs, &r.URLs, checkNATSURL, true)
	field(p, at+"replicas", n.Replicas, &r.Replicas, intWithin(1, 5))
	field(p, at+"stream", n.Stream, &r.Stream, checkStreamName)
	field(p, at+"creds_file", n.CredsFile, &r.CredsFile, nonEmpty)
	field(p, at+"nkey_file", n.NKeyFile, &r.NKeyFile, nonEmpty)
	field(p, at+"user", n.User, &r.User, nonEmpty)
	field(p, at+"password_file", n.PasswordFile, &r.PasswordFile, nonEmpty)
	field(p, at+"tls", n.TLS, &r.TLS, nil)
	field(p, at+"ca_file", n.CAFile, &r.CAFile, nonEmpty)
	field(p, at+"cert_file", n.CertFile, &r.CertFile, nonEmpty)
	field(p, at+"key_file", n.KeyFile, &r.KeyFile, nonEmpty)
	field(p, at+"on_unavailable", n.OnUnavailable, &r.OnUnavailable, oneOf(UnavailableRefuse, UnavailableLocal))
	field(p, at+"adopt_after", n.AdoptAfter, &r.AdoptAfter, durationWithin(time.Second, 24*time.Hour))
	field(p, at+"timeout", n.Timeout, &r.Timeout, durationWithin(10*time.Millisecond, time.Minute))
	if n.Embedded != nil {
		resolveEmbedded(p, n, r)
	}
	if !r.Enabled() {
		if line := firstLine(n.Replicas.Line, n.Stream.Line, n.CredsFile.Line, n.NKeyFile.Line, n.User.Line,
			n.PasswordFile.Line, n.TLS.Line, n.CAFile.Line, n.CertFile.Line, n.KeyFile.Line,
			n.OnUnavailable.Line, n.AdoptAfter.Line, n.Timeout.Line); line > 0 && !n.URLs.Set && n.URLs.Err == nil {
			p.add(line, at+"urls", "required in a spool.replicate.nats section")
		}
		return
	}
	auth := 0
	for _, s := range []string{r.CredsFile, r.NKeyFile, r.User} {
		if s != "" {
			auth++
		}
	}
	if auth > 1 {
		p.add(firstLine(n.NKeyFile.Line, n.User.Line, n.CredsFile.Line), at+"creds_file",
			"give one of creds_file, nkey_file or user (with password_file)")
	}
	if (r.User == "") != (r.PasswordFile == "") {
		if r.User == "" {
			p.add(n.PasswordFile.Line, at+"user", "required with password_file")
		} else {
			p.add(n.User.Line, at+"password_file", "required with user")
		}
	}
	if (r.CertFile == "") != (r.KeyFile == "") {
		p.add(firstLine(n.CertFile.Line, n.KeyFile.Line), at+"cert_file", "cert_file and key_file go together")
	}
	if r.Timeout >= r.AdoptAfter/3 {
		p.add(firstLine(n.Timeout.Line, n.AdoptAfter.Line), at+"timeout",
			"%v must be under a third of adopt_after (%v): heartbeats are sent every third", r.Timeout, r.AdoptAfter)
	}
}

func checkNATSURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("malformed URL: %v", err)
	}
	switch u.Scheme {
	case "nats", "tls":
	default:
		return fmt.Errorf("want a nats:// or tls:// URL, got %q", u.Scheme+"://")
	}
	if u.Host == "" {
		return fmt.Errorf("want host:port in %q", s)
	}
	if u.User != nil {
		return fmt.Errorf("give credentials in creds_file, nkey_file or user and password_file, not in the URL")
	}
	return nil
}

// resolveEmbedded checks spool.replicate.nats.embedded. The embedded
// server takes plain, unauthenticated connections: credentials and TLS,
// which are for a cluster the team runs, do not go with it.
func resolveEmbedded(p *problems, n *rawNATS, r *ReplicateConfig) {
	const at = "spool.replicate.nats.embedded."
	e, raw := &EmbeddedNATS{Listen: "127.0.0.1:4222", ClusterListen: "0.0.0.0:6222", Cluster: "hookpace"}, n.Embedded
	if !raw.Peers.Set && raw.Peers.Err == nil {
		p.add(firstLine(raw.Listen.Line, raw.ClusterListen.Line, raw.StoreDir.Line, raw.Cluster.Line), at+"peers",
			"required: host:port of every replica's cluster_listen (this one's too)")
	}
	list(p, at+"peers", raw.Peers, &e.Peers, checkHostPort, true)
	field(p, at+"listen", raw.Listen, &e.Listen, checkListen)
	field(p, at+"cluster_listen", raw.ClusterListen, &e.ClusterListen, checkListen)
	field(p, at+"store_dir", raw.StoreDir, &e.StoreDir, nonEmpty)
	field(p, at+"cluster", raw.Cluster, &e.Cluster, checkStreamName)
	r.Embedded = e
	if len(e.Peers) > 0 && r.Replicas > len(e.Peers) {
		p.add(firstLine(n.Replicas.Line, raw.Peers.Line), "spool.replicate.nats.replicas",
			"%d replicas, but embedded.peers names %d servers: a stream cannot have more replicas than servers", r.Replicas, len(e.Peers))
	}
	tlsLine := 0
	if r.TLS {
		tlsLine = n.TLS.Line
	}
	for _, f := range []struct {
		name string
		line int
	}{{"creds_file", n.CredsFile.Line}, {"nkey_file", n.NKeyFile.Line}, {"user", n.User.Line},
		{"password_file", n.PasswordFile.Line}, {"tls", tlsLine}, {"ca_file", n.CAFile.Line},
		{"cert_file", n.CertFile.Line}, {"key_file", n.KeyFile.Line}} {
		if f.line > 0 {
			p.add(f.line, "spool.replicate.nats."+f.name,
				"not with embedded: the embedded server takes plain connections (keep its ports inside the cluster's network)")
		}
	}
}

// checkStreamName allows what JetStream allows in a stream's name and a
// subject token: letters, digits, '-' and '_'.
func checkStreamName(s string) error {
	if s == "" || len(s) > 64 {
		return fmt.Errorf("want 1 to 64 characters")
	}
	if i := strings.IndexFunc(s, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_')
	}); i >= 0 {
		return fmt.Errorf("%q: only letters, digits, '-' and '_'", s[i:i+1])
	}
	return nil
}

// replicateRestart says that a change of the replication section needs a
// restart: the connection, the stream and the leases are set up once.
func replicateRestart(old, new ReplicateConfig) bool {
	o, n := old, new
	o.URLs, n.URLs = nil, nil
	return !slices.Equal(old.URLs, new.URLs) || !reflect.DeepEqual(o, n)
}
