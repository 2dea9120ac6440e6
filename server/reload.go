package server

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/egress"
	"github.com/hookpace/hookpace/internal/memtarget"
	"github.com/hookpace/hookpace/mitm"
	"github.com/hookpace/hookpace/proxy"
	"github.com/hookpace/hookpace/spool"
	"github.com/hookpace/hookpace/telemetry"
)

// reloader applies config changes on SIGHUP or when the file changes.
type reloader struct {
	path    string
	current *atomic.Pointer[config.Config]
	files   *atomic.Pointer[Files]
	log     *slog.Logger
	level   *slog.LevelVar
	guard   *egress.Swap
	spool   *spool.Spool
	disp    *deliver.Dispatcher
	proxy   interface {
		SetPolicy(proxy.Policy)
		SetCA(*mitm.CA)
	}
	trust *intercept
	tel   *telemetry.Telemetry // for the clients of credentials
	last  []byte
	// failed is the file's modification time when the last reload
	// failed; zero when it did not.
	failed time.Time
}

// watch polls the config file's content every 250 ms, which also sees
// Kubernetes ConfigMap updates (a symlink swap that inotify watchers miss),
// and reloads on each signal; after a failed reload, also when the file
// is touched.
func (r *reloader) watch(ctx context.Context, sig <-chan struct{}) {
	if r.path != "" {
		r.last, _ = os.ReadFile(r.path)
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var st settle
	for {
		select {
		case <-ctx.Done():
			return
		case <-sig:
			r.reload("signal")
		case <-tick.C:
			if r.path == "" {
				continue
			}
			b, err := os.ReadFile(r.path)
			switch {
			case err != nil:
			case st.settled(b, r.last):
				r.reload("file changed")
			case bytes.Equal(b, r.last) && r.touched():
				r.reload("file touched after a failed reload")
			}
		}
	}
}

// reload applies the config file, and after a failure remembers the
// file's modification time: the poll retries once it changes (a touch),
// so that what the config names (a key, a secret file) can be fixed and
// the file touched, without a signal.
func (r *reloader) reload(why string) {
	r.failed = time.Time{}
	if r.load(why) || r.path == "" {
		return
	}
	if fi, err := os.Stat(r.path); err == nil {
		r.failed = fi.ModTime()
	}
}

// touched reports whether the config file was modified since the last
// reload failed.
func (r *reloader) touched() bool {
	if r.failed.IsZero() {
		return false
	}
	fi, err := os.Stat(r.path)
	return err == nil && !fi.ModTime().Equal(r.failed)
}

// load applies the config file, or logs why not and reports false.
func (r *reloader) load(why string) bool {
	if r.path == "" {
		r.log.Warn("reload requested but hookpace runs on its embedded defaults: nothing to reload")
		return false
	}
	b, err := os.ReadFile(r.path)
	if err != nil {
		r.log.Error("config reload failed: old config stays in force", "why", why, "error", err)
		return false
	}
	r.last = b
	if err := vetFile(b); err != nil {
		r.log.Error("config reload rejected: old config stays in force", "why", why, "error", err.Error())
		return false
	}
	cfg, err := config.Parse(r.path, b)
	if err == nil {
		err = keepsGuards(r.current.Load(), cfg)
	}
	if err != nil {
		r.log.Error("config reload rejected: old config stays in force", "why", why, "error", err.Error())
		return false
	}
	// The files a start would load must load now, or the next restart
	// would fail on what this reload accepted.
	files, err := LoadFiles(cfg)
	if err != nil {
		r.log.Error("config reload rejected: old config stays in force", "why", why, "error", err.Error())
		return false
	}
	if err := r.guard.Set(cfg.Egress.Allow, cfg.Egress.Deny); err != nil {
		r.log.Error("config reload rejected: old config stays in force", "why", why, "error", err.Error())
		return false
	}
	for _, f := range config.RestartRequired(r.current.Load(), cfg) {
		r.log.Warn(f+" changed: restart to apply", "field", f)
	}
	if old := r.files.Load(); old != nil && old.RedisPassword != files.RedisPassword {
		r.log.Warn("fleet.redis password changed: restart to apply", "field", "fleet.redis password")
	}
	warnInsecure(r.log, cfg) // the warnings a start gives
	if err := telemetry.SetLevel(r.level, cfg.Log.Level); err != nil {
		r.log.Warn("log level unchanged", "error", err)
	}
	memtarget.Set(int64(cfg.Memory.Target))
	// A CA for newly named hosts first, so that their first CONNECT under
	// the new policy is intercepted.
	if changed, err := r.trust.apply(cfg, files.CA); err != nil {
		r.log.Error("mitm: the CA could not follow the reload; the one in force stays", "error", err)
	} else if changed {
		r.proxy.SetCA(r.trust.CA())
	}
	r.current.Store(cfg)
	if err := spool.SetRedactPaths(cfg.Journal.RedactPaths); err != nil {
		r.log.Error("journal.redact_paths not applied: the old patterns stay in force", "error", err)
	}
	files.bindCredentials(r.tel, r.guard, files.Roots)
	r.files.Store(files)
	r.proxy.SetPolicy(proxyPolicy(cfg, files))
	r.spool.SetLimits(cfg.Spool.MaxMessages, int64(cfg.Spool.MaxBytes), cfg.Spool.HighWater, cfg.Spool.LowWater)
	r.disp.SetPolicy(policies(cfg, files))
	r.log.Info("config reloaded", "why", why, "path", r.path, "hosts", len(cfg.Hosts))
	return true
}
