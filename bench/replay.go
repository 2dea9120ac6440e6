package main

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// 2. Replay

type replayRow struct {
	rep            int
	hpElapsed      time.Duration
	hpCount        int64
	hpCPU          time.Duration
	plainElapsed   time.Duration
	plainCount     int64
	prefillNon2xx  int64
	plainNon2xx    int64
	hpRate, plRate float64
	hpOthers       float64 // cores other processes used meanwhile
	plOthers       float64
	hpSteal        float64
	plSteal        float64
	tries          int
}

func (b *bench) replay() error {
	bin := b.bin
	if b.replayProf != "" {
		bin = filepath.Join(b.work, "hookpace-pprof")
		logf("replay: building ./bench/pprofwrap for -replay-profile")
		if err := goBuild(b.root, bin, "./bench/pprofwrap"); err != nil {
			return err
		}
		if err := os.MkdirAll(b.replayProf, 0o755); err != nil {
			return err
		}
	}
	for rep := 1; rep <= b.reps; rep++ {
		row, err := attempt(b.settings, "replay", func() (*replayRow, float64, error) {
			r, err := b.replayOnce(rep, bin)
			if err != nil {
				return nil, 0, err
			}
			return r, max(r.hpOthers+r.hpSteal, r.plOthers+r.plSteal), nil
		}, func(r *replayRow, n int) { r.tries = n })
		if err != nil {
			return err
		}
		b.rep.replay = append(b.rep.replay, row)
	}
	return nil
}

func (b *bench) replayOnce(rep int, bin string) (*replayRow, error) {
	c := b.c
	sink, err := startSink(2, http.StatusOK, "last")
	if err != nil {
		return nil, err
	}
	defer sink.stop()
	hpRecv, plainRecv := sink.addrs[0], sink.addrs[1]
	var env []string
	if b.replayProf != "" {
		pp, err := freePort()
		if err != nil {
			return nil, err
		}
		env = []string{"HOOKPACE_PPROF=" + pp}
	}
	cfg := hpConfig{logLevel: b.logLevel, bigSpool: true,
		hosts: []hostCfg{{key: hpRecv, rate: "1000000/s", burst: 1000, concurrency: c}}, extraEnv: env}
	if b.replayYAML != "" {
		y, err := os.ReadFile(b.replayYAML)
		if err != nil {
			return nil, fmt.Errorf("-replay-config: %w", err)
		}
		cfg.extra = string(y)
	}
	hp, err := startHookpace(bin, b.work, "replay", cfg)
	if err != nil {
		return nil, err
	}
	defer hp.cleanup(b.keep)
	if err := hp.pause(hpRecv); err != nil {
		return nil, err
	}
	row := &replayRow{rep: rep}
	logf("replay rep %d: prefilling %d webhooks (host paused)", rep, b.n)
	row.prefillNon2xx, err = postN(hp.proxy, "http://"+hpRecv+"/hook", b.body, b.n, 64)
	if err != nil && row.prefillNon2xx == int64(b.n) {
		return nil, err
	}
	if err := hp.waitQueued(int64(b.n)-row.prefillNon2xx, time.Minute); err != nil {
		return nil, err
	}
	time.Sleep(time.Second)
	b.waitQuiet("replay")
	logf("replay rep %d: resume; hookpace delivers %d with concurrency %d", rep, b.n, c)
	prof := ""
	if len(env) > 0 {
		prof = filepath.Join(b.replayProf, fmt.Sprintf("replay-rep%d.pprof", rep))
		tr := strings.TrimSuffix(prof, ".pprof") + ".trace"
		if err := pprofCtl(env, "start?file="+url.QueryEscape(prof)+"&trace="+url.QueryEscape(tr)); err != nil {
			return nil, err
		}
	}
	c0 := cpuTime(hp.pid())
	dist := startDisturbance()
	t0 := time.Now()
	if err := hp.resume(hpRecv); err != nil {
		return nil, err
	}
	want := int64(b.n) - row.prefillNon2xx
	st, err := waitCount(hpRecv, want, 10*time.Minute)
	if err != nil {
		return nil, err
	}
	row.hpCPU = cpuTime(hp.pid()) - c0
	if prof != "" {
		if err := pprofCtl(env, "stop"); err != nil {
			return nil, err
		}
		logf("replay: CPU profile and execution trace of the replay in %s, .trace", prof)
	}
	row.hpElapsed = time.Duration(st.LastNS - t0.UnixNano())
	row.hpOthers, row.hpSteal = dist.stop()
	row.hpCount = st.Count
	row.hpRate = float64(want) / row.hpElapsed.Seconds()
	hp.kill() // so that it takes no CPU from the baseline

	b.waitQuiet("replay")
	logf("replay rep %d: plain Go client posts %d with %d goroutines", rep, b.n, c)
	dist = startDisturbance()
	t0 = time.Now()
	row.plainNon2xx, _ = postN("", "http://"+plainRecv+"/hook", b.body, b.n, c)
	st, err = waitCount(plainRecv, int64(b.n), time.Minute)
	if err != nil {
		return nil, err
	}
	row.plainElapsed = time.Duration(st.LastNS - t0.UnixNano())
	row.plOthers, row.plSteal = dist.stop()
	row.plainCount = st.Count
	row.plRate = float64(b.n) / row.plainElapsed.Seconds()
	return row, nil
}
