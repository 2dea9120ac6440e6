package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
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
		b.bin, strings.TrimSpace(string(commit)), strings.Count(string(dirty), "\n"), fsType(work))
	fmt.Fprintf(&s, "disk:    %s\n", diskProbe(work, 3*time.Second))
	o, st := othersCores(3 * time.Second)
	fmt.Fprintf(&s, "load:    avg %s at start; just before the run other processes used %.2f of %d cores and the hypervisor stole %.2f (3s sample)\n",
		loadavg(), o, runtime.NumCPU(), st)
	fmt.Fprintf(&s, "command: %s\n", strings.Join(os.Args, " "))
	fmt.Fprintf(&s, "settings: ingest %v x %d reps, %d conns, %d B bodies, log.level=%s, generators %v; replay N=%d C=%d; rss %d queued; pacing backlog %v\n",
		b.dur, b.reps, b.conns, len(b.body), b.logLevel, b.gens, b.n, b.c, b.queued, b.backlog)
	return s.String()
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func fsType(dir string) string {
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return "?"
	}
	best, typ := "", "?"
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 {
			continue
		}
		if (dir == f[1] || strings.HasPrefix(dir, strings.TrimSuffix(f[1], "/")+"/")) && len(f[1]) >= len(best) {
			best, typ = f[1], f[2]+" on "+f[0]
			if len(f) > 3 && slices.Contains(strings.Split(f[3], ","), "discard") {
				typ += ", mounted with online discard"
			}
		}
	}
	return typ
}

// diskProbe appends 22 KB (a group commit's worth of records) to a file in
// dir and fdatasyncs it, over and over for d, and reports the latencies: the
// floor under every durable ingest, and the source of stalls no server that
// fsyncs can hide.
func diskProbe(dir string, d time.Duration) string {
	p, err := probeDisk(dir, d, 0)
	if err != nil {
		return "probe failed: " + err.Error()
	}
	lat := p.sorted()
	n := len(lat)
	return fmt.Sprintf("write+fdatasync of 22 KB in the work dir for %v: %d syncs, p50 %s, p99 %s, p99.9 %s, max %s; %d over 10ms",
		d, n, ms(lat[n/2]), ms(lat[n*99/100]), ms(lat[n*999/1000]), ms(lat[n-1]), p.over(10*time.Millisecond))
}

type diskSample struct {
	lat    []time.Duration
	secMax []time.Duration // worst sync in each second of the probe
}

func (p *diskSample) sorted() []time.Duration {
	lat := slices.Clone(p.lat)
	slices.Sort(lat)
	return lat
}

func (p *diskSample) over(limit time.Duration) int {
	n := 0
	for _, l := range p.lat {
		if l > limit {
			n++
		}
	}
	return n
}

// probeDisk runs the disk probe for d, one sync every `every` (0: back to
// back).
func probeDisk(dir string, d, every time.Duration) (*diskSample, error) {
	f, err := os.CreateTemp(dir, "disk-probe-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := bytes.Repeat([]byte("x"), 22000)
	p := &diskSample{}
	var size int64
	start := time.Now()
	for next := start; next.Sub(start) < d && time.Since(start) < d; next = next.Add(every) {
		if w := time.Until(next); w > 0 {
			time.Sleep(w)
		}
		t0 := time.Now()
		if _, err := f.Write(buf); err != nil {
			return nil, err
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return nil, err
		}
		l := time.Since(t0)
		p.lat = append(p.lat, l)
		sec := int(t0.Sub(start) / time.Second)
		for len(p.secMax) <= sec {
			p.secMax = append(p.secMax, 0)
		}
		p.secMax[sec] = max(p.secMax[sec], l)
		if size += int64(len(buf)); size > 64<<20 {
			f.Seek(0, io.SeekStart)
			size = 0
		}
	}
	return p, nil
}
