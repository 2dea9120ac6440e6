package replicate

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedOptions configures a nats-server run inside this process
// (spool.replicate.nats.embedded).
type EmbeddedOptions struct {
	// Name is the server's name, the replica's: JetStream's Raft groups
	// know their members by it, so it must stay the same across restarts
	// on the same store.
	Name          string
	Listen        string   // client listener, host:port
	ClusterListen string   // route listener, host:port
	Peers         []string // every replica's ClusterListen as the others reach it; this one's is ignored by the server
	StoreDir      string   // JetStream's file store
	Cluster       string   // the cluster's name
	Logger        *slog.Logger
}

// Embedded is a nats-server running in this process, with JetStream.
type Embedded struct {
	s   *server.Server
	log *slog.Logger
	url string
}

// StartEmbedded starts the server and returns once it takes clients, with
// JetStream on. Its peers need not be up yet: routes to them are retried
// until they answer; until a majority is there, the stream takes no writes.
func StartEmbedded(o EmbeddedOptions) (*Embedded, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	host, port, err := splitListen(o.Listen)
	if err != nil {
		return nil, fmt.Errorf("spool.replicate.nats.embedded.listen: %w", err)
	}
	opts := &server.Options{ServerName: o.Name, Host: host, Port: port, NoSigs: true,
		JetStream: true, StoreDir: o.StoreDir,
		// Stopping is the last step of hookpace's own stop (after the
		// spool's last publish and delete): leaderships move to the
		// peers at once, and no client is left to wait for.
		LameDuckDuration: 5 * time.Second, LameDuckGracePeriod: time.Second}
	if len(o.Peers) > 1 {
		chost, cport, err := splitListen(o.ClusterListen)
		if err != nil {
			return nil, fmt.Errorf("spool.replicate.nats.embedded.cluster_listen: %w", err)
		}
		opts.Cluster = server.ClusterOpts{Name: o.Cluster, Host: chost, Port: cport}
		for _, p := range o.Peers {
			opts.Routes = append(opts.Routes, &url.URL{Scheme: "nats-route", Host: p})
		}
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("spool.replicate.nats.embedded: %w", err)
	}
	l := &natsLog{log: o.Logger.With("nats", o.Name)}
	s.SetLoggerV2(l, false, false, false)
	s.Start()
	// A server that failed (a port in use, a store it cannot use) says
	// so in its log and never becomes ready: that ends the wait.
	for deadline := time.Now().Add(30 * time.Second); !s.ReadyForConnections(100 * time.Millisecond); {
		if l.failed() || time.Now().After(deadline) {
			s.Shutdown()
			return nil, fmt.Errorf("spool.replicate.nats.embedded: the server did not start: %v", l.fatalErr())
		}
	}
	if !s.JetStreamEnabled() {
		s.Shutdown()
		return nil, fmt.Errorf("spool.replicate.nats.embedded: JetStream did not start (store_dir %s): %v", o.StoreDir, l.fatalErr())
	}
	e := &Embedded{s: s, log: o.Logger}
	addr, _ := s.Addr().(*net.TCPAddr)
	if addr == nil {
		s.Shutdown()
		return nil, errors.New("spool.replicate.nats.embedded: the server has no client listener")
	}
	ip := addr.IP
	if ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	e.url = "nats://" + net.JoinHostPort(ip.String(), strconv.Itoa(addr.Port))
	return e, nil
}

// splitListen parses host:port; port 0 is any free port.
func splitListen(s string) (string, int, error) {
	host, p, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("port %q", p)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return host, port, nil
}

// URL is where this process's own client connects: the client listener
// (on the loopback address when it listens on all of them).
func (e *Embedded) URL() string { return e.url }

// ClusterAddr is the route listener's address.
func (e *Embedded) ClusterAddr() string {
	if a := e.s.ClusterAddr(); a != nil {
		return a.String()
	}
	return ""
}

// Shutdown stops the server in lame-duck mode: no new clients, its Raft
// leaderships (the stream's, the buckets', the meta group's) handed to
// its peers, then the server stops. Call it after the replication's
// Close: a rolling restart then costs the stream no election while a
// write waits.
func (e *Embedded) Shutdown() {
	e.s.LameDuckShutdown()
	e.s.WaitForShutdown()
}

// natsLog writes the server's log to hookpace's: notices at debug level
// (a start alone writes dozens), warnings and errors as they are.
type natsLog struct {
	log   *slog.Logger
	mu    sync.Mutex
	fatal string
}

func (l *natsLog) Noticef(format string, v ...any) { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *natsLog) Warnf(format string, v ...any)   { l.log.Warn(fmt.Sprintf(format, v...)) }
func (l *natsLog) Errorf(format string, v ...any)  { l.log.Error(fmt.Sprintf(format, v...)) }
func (l *natsLog) Debugf(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *natsLog) Tracef(format string, v ...any)  {}

// Fatalf records the server's fatal error (it does not exit hookpace:
// StartEmbedded reports it).
func (l *natsLog) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.log.Error(msg)
	l.mu.Lock()
	l.fatal = msg
	l.mu.Unlock()
}

func (l *natsLog) failed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fatal != ""
}

func (l *natsLog) fatalErr() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fatal == "" {
		return "no error logged"
	}
	return l.fatal
}
