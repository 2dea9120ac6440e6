package main

import (
	"fmt"
	"net"
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

	// The same number of webhooks spread over many hosts.
	hosts                                    int
	manyFillTime                             time.Duration
	manyRejected                             int64
	manyMsgs                                 int64
	manySettled, manyPeak, manySampMax       int64
	manyRestartRSS, manyRestartHWM, manyLeft int64
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
	stop := sample(hp.pid(), &sampMax)
	logf("rss: queueing %d webhooks behind a 1/s host", b.queued)
	t0 := time.Now()
	r.fillRejected, _ = postN(hp.proxy, "http://"+host+"/hook", b.body, b.queued, 64)
	r.fillTime = time.Since(t0)
	time.Sleep(5 * time.Second)
	stop()
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
	if r.restartRSS, r.restartHWM, r.restartMsgs, err = b.restartMemory(hp, cfg); err != nil {
		return err
	}
	if b.rssHosts > 0 {
		return b.rssManyHosts(r, recv)
	}
	return nil
}

// rssManyHosts queues the same webhooks spread evenly over b.rssHosts
// hosts, each at 1/h with a burst of 1, so that nearly all stay queued:
// what a dispatcher that holds a window per host costs when there are
// thousands. The hosts are loopback addresses 127.0.x.y on the
// sink's port; only 127.0.0.1 answers, the others refuse, and their one
// retry waits an hour for its token.
func (b *bench) rssManyHosts(r *rssResult, recv *sinkProc) error {
	_, port, err := net.SplitHostPort(recv.addrs[0])
	if err != nil {
		return err
	}
	r.hosts = b.rssHosts
	targets := make([]string, b.rssHosts)
	for i := range targets {
		targets[i] = fmt.Sprintf("http://127.0.%d.%d:%s/hook", i/250, i%250+1, port)
	}
	cfg := hpConfig{logLevel: b.logLevel, defaultRate: "1/h", defaultBurst: 1}
	hp, err := startHookpace(b.bin, b.work, "rss-hosts", cfg)
	if err != nil {
		return err
	}
	defer hp.cleanup(b.keep)
	var sampMax atomic.Int64
	stop := sample(hp.pid(), &sampMax)
	logf("rss: queueing %d webhooks over %d hosts at 1/h", b.queued, b.rssHosts)
	t0 := time.Now()
	r.manyRejected, _ = postSpread(hp.proxy, targets, b.body, b.queued, 64)
	r.manyFillTime = time.Since(t0)
	time.Sleep(5 * time.Second)
	stop()
	r.manySampMax = sampMax.Load()
	if r.manySettled, r.manyPeak, err = memKiB(hp.pid()); err != nil {
		return err
	}
	if u, err := hp.spool(); err == nil {
		r.manyMsgs = u.Messages
	}
	logf("rss: restarting hookpace on the many-hosts spool")
	r.manyRestartRSS, r.manyRestartHWM, r.manyLeft, err = b.restartMemory(hp, cfg)
	return err
}

// restartMemory kills hp, starts hookpace again on its spool and config,
// and reads its memory (KiB) once it has settled, and how many webhooks
// its spool holds.
func (b *bench) restartMemory(hp *hookpace, cfg hpConfig) (rss, hwm, queued int64, err error) {
	hp.kill()
	hp2, err := restartHookpace(hp, b.bin, cfg)
	if err != nil {
		return 0, 0, 0, err
	}
	defer hp2.kill()
	time.Sleep(5 * time.Second)
	if rss, hwm, err = memKiB(hp2.pid()); err != nil {
		return 0, 0, 0, err
	}
	if u, err := hp2.spool(); err == nil {
		queued = u.Messages
	}
	return rss, hwm, queued, nil
}

// sample records pid's highest VmRSS in max every 100 ms until the
// function it returns is called.
func sample(pid int, max *atomic.Int64) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			if rss, _, err := memKiB(pid); err == nil && rss > max.Load() {
				max.Store(rss)
			}
			select {
			case <-quit:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() { close(quit); <-done }
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
