package server

import (
	"context"
	"fmt"
	"os"
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
	o := replicate.Options{URLs: rc.URLs, Replicas: rc.Replicas, Stream: rc.Stream, Replica: name,
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
