package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/hookpace/hookpace/bench/hostinfo"
)

// machine

func machineInfo(root, work string, b *bench) string {
	var s strings.Builder
	model := "?"
	if c, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(c), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	mem := "?"
	if m, err := os.ReadFile("/proc/meminfo"); err == nil {
		mem = strings.TrimSpace(strings.TrimPrefix(strings.Split(string(m), "\n")[0], "MemTotal:"))
	}
	commit, _ := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	dirty, _ := exec.Command("git", "-C", root, "status", "--porcelain").Output()
	wrk := "not installed"
	if haveWrk() {
		v, _ := exec.Command("wrk", "-v").CombinedOutput()
		wrk = strings.SplitN(string(v), " ", 3)[1]
	}
	fmt.Fprintf(&s, "hookpace bench  %s\n", time.Now().Format(time.RFC3339))
	fmt.Fprintf(&s, "machine: nproc=%d  cpu=%q  mem=%s  kernel=%s  %s  wrk=%s\n", runtime.NumCPU(), model, mem,
		strings.TrimSpace(string(kernel)), runtime.Version(), wrk)
	fmt.Fprintf(&s, "tree:    %s at %s (%d uncommitted paths)  spool fs: %s\n",
		b.bin, strings.TrimSpace(string(commit)), strings.Count(string(dirty), "\n"), hostinfo.FSType(work))
	fmt.Fprintf(&s, "disk:    %s\n", diskProbe(work, 3*time.Second))
	o, st := othersCores(3 * time.Second)
	fmt.Fprintf(&s, "load:    avg %s at start; just before the run other processes used %.2f of %d cores and the hypervisor stole %.2f (3s sample)\n",
		hostinfo.LoadAvg(), o, runtime.NumCPU(), st)
	fmt.Fprintf(&s, "command: %s\n", strings.Join(os.Args, " "))
	fmt.Fprintf(&s, "settings: ingest %v x %d reps, %d conns, %d B bodies, log.level=%s, generators %v; replay N=%d C=%d; rss %d queued; pacing backlog %v\n",
		b.dur, b.reps, b.conns, len(b.body), b.logLevel, b.gens, b.n, b.c, b.queued, b.backlog)
	return s.String()
}

// diskProbe reports hostinfo.ProbeDisk's latencies in dir, syncing back
// to back for d.
func diskProbe(dir string, d time.Duration) string {
	p, err := hostinfo.ProbeDisk(dir, d, 0)
	if err != nil {
		return "probe failed: " + err.Error()
	}
	lat := p.Sorted()
	n := len(lat)
	return fmt.Sprintf("write+fdatasync of 22 KB in the work dir for %v: %d syncs, p50 %s, p99 %s, p99.9 %s, max %s; %d over 10ms",
		d, n, ms(lat[n/2]), ms(lat[n*99/100]), ms(lat[n*999/1000]), ms(lat[n-1]), p.Over(10*time.Millisecond))
}
