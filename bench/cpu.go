package main

// CPU and memory from /proc: what the process under test used, and what
// everything else on the machine took meanwhile (a disturbed run).

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// /proc

// memKiB reads VmRSS and VmHWM (KiB) of pid.
func memKiB(pid int) (rss, hwm int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = v
		case "VmHWM:":
			hwm = v
		}
	}
	return rss, hwm, nil
}

// cpuTime is the user+system CPU time pid has used (USER_HZ = 100).
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	s = s[strings.LastIndexByte(s, ')')+2:] // fields from 3 (state) on
	f := strings.Fields(s)
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64) // field 14
	st, _ := strconv.ParseInt(f[12], 10, 64) // field 15
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// machineBusy is the CPU time the whole machine (all CPUs summed, from
// /proc/stat) spent busy, and the time stolen by the hypervisor: this is a
// VM, and steal is time our vCPUs wanted to run but the host ran someone
// else.
func machineBusy() (busy, steal time.Duration) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0
	}
	var t int64
	for _, i := range []int{1, 2, 3, 6, 7} {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		t += v
	}
	st, _ := strconv.ParseInt(f[8], 10, 64)
	return time.Duration(t) * 10 * time.Millisecond, time.Duration(st) * 10 * time.Millisecond
}

// cpuSplit is where the machine's CPU went during one measured run.
type cpuSplit struct {
	server, gen, others, rest, steal time.Duration
}

// cpuMeter snapshots the machine, the server process and the generator.
type cpuMeter struct {
	srvPid              int
	machine, steal, srv time.Duration
	self                time.Duration
	procs               map[int]int64
}

func startCPU(srvPid int) *cpuMeter {
	m := &cpuMeter{srvPid: srvPid, procs: procTicks(), srv: cpuTime(srvPid), self: cpuTime(os.Getpid())}
	m.machine, m.steal = machineBusy()
	return m
}

// stop returns the split. genCPU is the CPU of an external generator
// process (wrk); with 0 the generator is this process.
func (m *cpuMeter) stop(genCPU time.Duration) cpuSplit {
	s := cpuSplit{server: cpuTime(m.srvPid) - m.srv}
	if genCPU > 0 {
		s.gen = genCPU
	} else {
		s.gen = cpuTime(os.Getpid()) - m.self
	}
	busy, steal := machineBusy()
	s.rest = busy - m.machine - s.server - s.gen
	s.steal = steal - m.steal
	s.others = othersSince(m.procs)
	s.rest -= s.others
	return s
}

// procTicks is, for every process but this one and its children, the CPU
// it and its reaped children have used (utime+stime+cutime+cstime, in
// ticks). The difference of two snapshots is what other processes (other
// engineers' builds and tests) took meanwhile; processes that exited in
// between are counted through their parent's cutime/cstime.
func procTicks() map[int]int64 {
	self := os.Getpid()
	out := map[int]int64{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 > len(s) {
			continue
		}
		f := strings.Fields(s[i+2:]) // f[0] is field 3 (state)
		if len(f) < 15 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == self {
			continue // ours: measured separately
		}
		var t int64
		for _, k := range []int{11, 12, 13, 14} { // utime stime cutime cstime
			v, _ := strconv.ParseInt(f[k], 10, 64)
			t += v
		}
		out[pid] = t
	}
	return out
}

func othersSince(before map[int]int64) time.Duration {
	var d int64
	for pid, t := range procTicks() {
		if d0, ok := before[pid]; ok {
			if t > d0 {
				d += t - d0
			}
		} else {
			d += t
		}
	}
	return time.Duration(d) * 10 * time.Millisecond
}

// othersCores samples how many cores other processes use, and how many the
// hypervisor steals, over d.
func othersCores(d time.Duration) (others, steal float64) {
	before := procTicks()
	_, s0 := machineBusy()
	time.Sleep(d)
	_, s1 := machineBusy()
	return othersSince(before).Seconds() / d.Seconds(), (s1 - s0).Seconds() / d.Seconds()
}

// waitQuiet waits, up to -quiet-wait, until other processes plus steal
// take less than -quiet cores (1s samples), so that a measurement does
// not start in the middle of someone else's test run.
func (s *settings) waitQuiet(what string) {
	if s.quiet <= 0 {
		return
	}
	deadline := time.Now().Add(s.quietWait)
	for {
		o, st := othersCores(time.Second)
		if o+st < s.quiet {
			return
		}
		if time.Now().After(deadline) {
			logf("%s: other processes use %.2f cores and steal is %.2f after waiting %v; measuring anyway", what, o, st, s.quietWait)
			return
		}
		logf("%s: other processes use %.2f cores, steal %.2f; waiting for < %.2f together", what, o, st, s.quiet)
	}
}

// disturbance measures what other processes and the hypervisor took over
// an interval.
type disturbance struct {
	procs map[int]int64
	steal time.Duration
	t0    time.Time
}

func startDisturbance() *disturbance {
	_, st := machineBusy()
	return &disturbance{procs: procTicks(), steal: st, t0: time.Now()}
}

// stop returns cores used by other processes and cores stolen, averaged over the interval.
func (d *disturbance) stop() (others, steal float64) {
	el := time.Since(d.t0).Seconds()
	_, st := machineBusy()
	return othersSince(d.procs).Seconds() / el, (st - d.steal).Seconds() / el
}

// attempt runs f, and again up to -retries times while the run was
// disturbed (other processes plus steal above -disturbed cores); it keeps
// the least disturbed result and records the number of tries with setTries.
func attempt[T any](s *settings, what string, f func() (T, float64, error), setTries func(T, int)) (T, error) {
	var best T
	bestD := math.Inf(1)
	n := 0
	for try := 0; try <= s.retries; try++ {
		r, d, err := f()
		if err != nil {
			return r, err
		}
		n++
		if d < bestD {
			best, bestD = r, d
		}
		if d <= s.disturbed {
			break
		}
		if try < s.retries {
			logf("%s: disturbed (other processes + steal %.2f cores); measuring again", what, d)
		}
	}
	setTries(best, n)
	return best, nil
}

// disturbance is the cores that other processes and steal took over el.
func (c cpuSplit) disturbance(el time.Duration) float64 {
	if el <= 0 {
		return 0
	}
	return (c.others + c.steal).Seconds() / el.Seconds()
}
