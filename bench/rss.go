package main

import (
	"net/http"
	"path/filepath"
	"sync/atomic"
	"time"
)

// 3. RSS

type rssResult struct {
	queued                       int
	idleRSS, idleHWM             int64 // KiB
	fillRejected                 int64
	fillTime                     time.Duration
	queuedMsgs                   int64
	queuedBytes                  int64
	settledRSS, peakHWM, sampMax int64
	restartRSS, restartHWM       int64
	restartMsgs                  int64
}

func (b *bench) rss() error {
	recv, err := startSink(1, http.StatusOK, "none")
	if err != nil {
		return err
	}
	defer recv.stop()
	host := recv.addrs[0]
	// Product defaults for the spool (1M messages / 1GiB): 200k x 1 KiB is
	// far below the high-water mark.
	cfg := hpConfig{logLevel: b.logLevel, hosts: []hostCfg{{key: host, rate: "1/s", burst: 1, concurrency: 1}}}
	hp, err := startHookpace(b.bin, b.work, "rss", cfg)
	if err != nil {
		return err
	}
	defer hp.cleanup(b.keep)
	r := &rssResult{queued: b.queued}
	b.rep.rss = r
	time.Sleep(3 * time.Second)
	if r.idleRSS, r.idleHWM, err = memKiB(hp.pid()); err != nil {
		return err
	}
	var sampMax atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if rss, _, err := memKiB(hp.pid()); err == nil && rss > sampMax.Load() {
				sampMax.Store(rss)
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	logf("rss: queueing %d webhooks behind a 1/s host", b.queued)
	t0 := time.Now()
	r.fillRejected, _ = postN(hp.proxy, "http://"+host+"/hook", b.body, b.queued, 64)
	r.fillTime = time.Since(t0)
	time.Sleep(5 * time.Second)
	close(stop)
	<-done
	r.sampMax = sampMax.Load()
	if r.settledRSS, r.peakHWM, err = memKiB(hp.pid()); err != nil {
		return err
	}
	u, err := hp.spool()
	if err != nil {
		return err
	}
	r.queuedMsgs, r.queuedBytes = u.Messages, u.Bytes

	// The same spool after a restart: what a backlog costs at rest.
	logf("rss: restarting hookpace on the same spool")
	hp.kill()
	hp2, err := restartHookpace(hp, b.bin, cfg)
	if err != nil {
		return err
	}
	defer hp2.kill()
	time.Sleep(5 * time.Second)
	if r.restartRSS, r.restartHWM, err = memKiB(hp2.pid()); err != nil {
		return err
	}
	if u, err := hp2.spool(); err == nil {
		r.restartMsgs = u.Messages
	}
	return nil
}

// restartHookpace starts a new process on old's config and spool.
func restartHookpace(old *hookpace, bin string, c hpConfig) (*hookpace, error) {
	h := &hookpace{bin: bin, dir: old.dir, proxy: old.proxy, admin: old.admin, exited: make(chan struct{}),
		logPath: filepath.Join(old.dir, "hookpace-restart.log")}
	if err := h.launch(filepath.Join(old.dir, "hookpace.yaml"), c, "restart", 60*time.Second); err != nil {
		return nil, err
	}
	return h, nil
}
