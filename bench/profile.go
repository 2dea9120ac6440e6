package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// runProfile runs hookpace built with net/http/pprof (bench/pprofwrap) under
// wrk and saves a CPU profile of the middle of the run, then prints the top
// of it.
func (b *bench) runProfile(path string) error {
	if !haveWrk() {
		return fmt.Errorf("-profile needs wrk")
	}
	bin := filepath.Join(b.work, "hookpace-pprof")
	logf("profile: building ./bench/pprofwrap")
	if err := goBuild(b.root, bin, "./bench/pprofwrap"); err != nil {
		return err
	}
	recv, err := startSink(1, http.StatusOK, "none")
	if err != nil {
		return err
	}
	defer recv.stop()
	target := "http://" + recv.addrs[0] + "/hook"
	script, err := wrkScript(b.work, target, b.body)
	if err != nil {
		return err
	}
	pp, err := freePort()
	if err != nil {
		return err
	}
	hp, err := startHookpace(bin, b.work, "profile", hpConfig{logLevel: b.logLevel, bigSpool: true,
		hosts:    []hostCfg{{key: recv.addrs[0], rate: "1/s", burst: 1, concurrency: 1}},
		extraEnv: []string{"HOOKPACE_PPROF=" + pp}})
	if err != nil {
		return err
	}
	defer hp.cleanup(b.keep)
	if err := hp.pause(recv.addrs[0]); err != nil {
		return err
	}
	dur := max(b.dur, 10*time.Second) + 2*time.Second
	b.waitQuiet("profile")
	secs := int(dur.Seconds()) - 4
	var prof []byte
	var perr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(2 * time.Second)
		c := &http.Client{Transport: &http.Transport{Proxy: nil}}
		resp, err := c.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", pp, secs))
		if err != nil {
			perr = err
			return
		}
		defer resp.Body.Close()
		prof, perr = io.ReadAll(resp.Body)
	}()
	logf("profile: wrk for %v, CPU profile of %ds of it", dur, secs)
	res, err := runWrk(hp.proxy, script, 2, b.conns, dur)
	wg.Wait()
	if err != nil {
		return err
	}
	if perr != nil {
		return perr
	}
	if err := os.WriteFile(path, prof, 0o644); err != nil {
		return err
	}
	// Allocations since start (sampled), for the alloc_space view.
	if resp, err := ctl.Get("http://" + pp + "/debug/pprof/allocs"); err == nil {
		a, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		os.WriteFile(strings.TrimSuffix(path, ".pprof")+".allocs.pprof", a, 0o644)
	}
	top, _ := exec.Command("go", "tool", "pprof", "-top", "-nodecount=30", bin, path).CombinedOutput()
	cum, _ := exec.Command("go", "tool", "pprof", "-top", "-cum", "-nodecount=45", bin, path).CombinedOutput()
	b.rep.profile = fmt.Sprintf("CPU profile of hookpace under wrk (%.0f req/s with pprof linked in): %s\nbinary: %s (kept only with -keep)\n\n%s\n%s",
		res.RPS(), path, bin, top, cum)
	return nil
}
