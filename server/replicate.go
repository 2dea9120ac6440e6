package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/replicate"
	"github.com/hookpace/hookpace/telemetry"
)

// connectReplica connects to the stream the spool is replicated to (nil
// without spool.replicate.nats), before the spool opens: the spool calls
// it from its first commit on.
func (a *app) connectReplica(ctx context.Context, cfg *config.Config) error {
	rc := cfg.Spool.Replicate
	if !rc.Enabled() {
		return nil
	}
	name := replicaName(cfg)
	if name == "" {
		return cfg.FieldError("fleet.replica", fmt.Errorf("spool.replicate needs a stable replica name: set fleet.replica (the pod's name)"))
	}
	urls, err := a.startEmbedded(cfg, name)
	if err != nil {
		return err
	}
	o := replicate.Options{URLs: urls, Ordered: rc.Embedded != nil, Replicas: rc.Replicas, Stream: rc.Stream, Replica: name,
		CredsFile: rc.CredsFile, NKeyFile: rc.NKeyFile, User: rc.User, Local: rc.OnUnavailable == config.UnavailableLocal,
		AdoptAfter: rc.AdoptAfter.D(), Timeout: rc.Timeout.D(), Logger: a.log,
		Emit: func(typ string, data map[string]any) {
			a.events.Emit(deliver.Event{Type: typ, At: time.Now(), Data: data})
		}}
	if rc.PasswordFile != "" {
		b, err := os.ReadFile(rc.PasswordFile)
		if err != nil {
			return cfg.FieldError("spool.replicate.nats.password_file", err)
		}
		o.Password = strings.TrimRight(string(b), "\r\n")
	}
	if rc.TLS || rc.CAFile != "" || rc.CertFile != "" {
		t, err := replicate.TLSConfig(rc.CAFile, rc.CertFile, rc.KeyFile)
		if err != nil {
			return err
		}
		o.TLS = t
	}
	r, err := replicate.Connect(ctx, o)
	if err != nil {
		return err
	}
	a.repl = r
	a.undo = append(a.undo, r.Close) // after the spool's close: undo runs in reverse
	a.tel.Metrics.ObserveReplication(func() telemetry.ReplicationSnapshot {
		s := r.Status()
		return telemetry.ReplicationSnapshot{Reachable: s.Reachable, LocalOnly: s.LocalOnly, Failed: s.FailedRounds,
			Adopted: s.Adopted, Lag: int64(s.Lag)}
	})
	a.log.Info("spool replicated to NATS JetStream", "stream", rc.Stream, "replica", name, "replicas", rc.Replicas,
		"on_unavailable", rc.OnUnavailable, "adopt_after", rc.AdoptAfter.D().String())
	return nil
}

// startEmbedded starts spool.replicate.nats.embedded's server, if there is
// one, and returns the servers the replica's client connects to: its own
// first, then urls (extra servers; the cluster's others are learnt from
// it). The server stops after the replication closes (undo runs in
// reverse), so the spool's last publishes and deletes reach it.
func (a *app) startEmbedded(cfg *config.Config, name string) ([]string, error) {
	rc := cfg.Spool.Replicate
	e := rc.Embedded
	if e == nil {
		return rc.URLs, nil
	}
	store := e.StoreDir
	if store == "" {
		store = filepath.Join(cfg.Spool.Dir, "nats")
	}
	start := time.Now()
	srv, err := replicate.StartEmbedded(replicate.EmbeddedOptions{Name: name, Listen: e.Listen, ClusterListen: e.ClusterListen,
		Peers: e.Peers, StoreDir: store, Cluster: e.Cluster, Logger: a.log})
	if err != nil {
		return nil, err
	}
	a.undo = append(a.undo, func() {
		begin := time.Now()
		srv.Shutdown()
		a.log.Info("embedded NATS server stopped (lame duck: its leaderships handed to its peers)",
			"took_ms", time.Since(begin).Milliseconds())
	})
	a.log.Info("embedded NATS server started", "name", name, "client", srv.URL(), "cluster", srv.ClusterAddr(),
		"peers", strings.Join(e.Peers, ","), "store_dir", store, "extra_urls", strings.Join(rc.URLs, ","),
		"took_ms", time.Since(start).Milliseconds())
	return append([]string{srv.URL()}, rc.URLs...), nil
}

// replicaName is this replica's stable name: fleet.replica, else the
// host's name (a pod's name in Kubernetes), as a subject token.
func replicaName(cfg *config.Config) string {
	if cfg.Fleet.Replica != "" {
		return replicate.Token(cfg.Fleet.Replica)
	}
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	return replicate.Token(h)
}

// startReplica takes the replica's lease and reconciles its queue with the
// stream: before the dispatcher starts, so that nothing another replica
// adopted is delivered from the local spool.
func (a *app) startReplica(ctx context.Context) error {
	if a.repl == nil {
		return nil
	}
	if err := a.repl.Start(ctx, a.spool); err != nil {
		return fmt.Errorf("spool.replicate: %w", err)
	}
	return nil
}

// replicationStatus is the admin API's view of the replication; nil
// without it.
func (a *app) replicationStatus() func() replicate.Status {
	if a.repl == nil {
		return nil
	}
	return a.repl.Status
}
