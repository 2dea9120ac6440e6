// Command peers measures hookpace against a peer webhook server, webhookx,
// on the same machine with the same load, in alternating pairs (hookpace,
// webhookx, hookpace, webhookx, ...), and prints one table of the pairs and
// their ratios; -doc writes it into docs/performance.md.
//
// Each measurement starts its system fresh and sends, from this process:
//
//  1. ingest: -n 1 KiB JSON webhooks over -conns keep-alive connections,
//     each connection one POST after another, with deliveries held
//     (hookpace: the sink's host paused; webhookx: its worker off);
//     accepted/s, and the CPU all the system's processes used per
//     accepted webhook;
//  2. delivery: the deliveries released (hookpace: resumed; webhookx:
//     restarted with its worker on) until the sink has every webhook;
//     delivered/s from the first delivery to the last (so that neither
//     way of releasing counts), and CPU per delivered webhook from the
//     release on;
//  3. latency: -rate webhooks a second for -latency-for, open loop, with
//     deliveries flowing; from the start of each POST to the sink's first
//     receipt, p50 and p99, and from the 2xx answer, p99.
//
// The CPU is read from /proc/PID/stat for every process of the system and
// its descendants: hookpace alone; webhookx with its PostgreSQL (the
// postmaster and every backend) and its redis-server.
//
// Run it from the module root, as root or as a user that may start
// PostgreSQL (as root it runs PostgreSQL as the postgres user):
//
//	go run ./bench/peers -webhookx /path/to/webhookx -doc docs/performance.md
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/hookpace/hookpace/bench/hostinfo"
)

type options struct {
	webhookx, pgBin, hookpace, work, doc, out string
	pairs, n, conns, rate, concurrency        int
	latencyFor, deliverLimit                  time.Duration
	keep                                      bool
}

func main() {
	var o options
	flag.StringVar(&o.webhookx, "webhookx", "", "the webhookx v1.2.0 binary to measure (required)")
	flag.StringVar(&o.pgBin, "pg-bin", "", "PostgreSQL's server binaries (default: the newest /usr/lib/postgresql/*/bin)")
	flag.StringVar(&o.hookpace, "hookpace", "", "a hookpace binary (default: build ./cmd/hookpace from this tree)")
	flag.StringVar(&o.work, "workdir", "", "where the stores go (default: a new directory under $TMPDIR)")
	flag.StringVar(&o.doc, "doc", "", "write the results as a section of this Markdown file (docs/performance.md)")
	flag.StringVar(&o.out, "out", "", "also write the report to this file")
	flag.IntVar(&o.pairs, "pairs", 3, "alternating pairs (hookpace then webhookx)")
	flag.IntVar(&o.n, "n", 10000, "webhooks per ingest and delivery run")
	flag.IntVar(&o.conns, "conns", 64, "connections for ingest")
	flag.IntVar(&o.rate, "rate", 200, "offered webhooks/s in the latency run")
	flag.DurationVar(&o.latencyFor, "latency-for", 10*time.Second, "length of the latency run")
	flag.IntVar(&o.concurrency, "concurrency", 64, "hookpace's concurrency for the sink's host (webhookx's default is 100 per CPU)")
	flag.DurationVar(&o.deliverLimit, "deliver-limit", 10*time.Minute, "give up waiting for the deliveries of a run after this")
	flag.BoolVar(&o.keep, "keep", false, "keep the stores and logs")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runBench(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
}

func runBench(ctx context.Context, o options) error {
	if o.pairs < 1 || o.n < 1 || o.conns < 1 || o.rate < 1 || o.latencyFor < time.Second/time.Duration(o.rate) {
		return fmt.Errorf("-pairs, -n, -conns and -rate must be at least 1, and -latency-for at least one webhook's interval")
	}
	if o.webhookx == "" {
		return fmt.Errorf("-webhookx is required: the path of a webhookx v1.2.0 binary (see docs/performance.md#peer-benchmark-kit)")
	}
	var err error
	if o.webhookx, err = filepath.Abs(o.webhookx); err != nil {
		return err
	}
	if o.pgBin == "" {
		if o.pgBin, err = findPgBin(); err != nil {
			return err
		}
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		return fmt.Errorf("redis-server is not installed (Debian: apt-get install redis-server): %w", err)
	}
	if o.work == "" {
		if o.work, err = os.MkdirTemp("", "hookpace-peers-"); err != nil {
			return err
		}
		if !o.keep {
			defer os.RemoveAll(o.work)
		}
	}
	// PostgreSQL runs as the postgres user and must reach its directory.
	if err := os.Chmod(o.work, 0o755); err != nil {
		return err
	}
	if o.hookpace == "" {
		o.hookpace = filepath.Join(o.work, "hookpace")
		logf("building ./cmd/hookpace")
		if err := run(exec.Command("go", "build", "-o", o.hookpace, "./cmd/hookpace")); err != nil {
			return fmt.Errorf("building hookpace (run from the module root): %w", err)
		}
	}
	m := describeMachine(o)
	logf("machine:\n%s", m.text())

	s, err := startSink()
	if err != nil {
		return err
	}
	defer s.srv.Close()

	var pairs []pair
	gen := 0
	for i := range o.pairs {
		var pr pair
		for _, sys := range []system{
			&hookpaceSys{bin: o.hookpace, concurrency: o.concurrency},
			&webhookxSys{bin: o.webhookx, pgBin: o.pgBin},
		} {
			logf("pair %d: %s", i+1, sys.name())
			r, err := measure(ctx, o, s, sys, &gen)
			if err != nil {
				return fmt.Errorf("pair %d, %s: %w", i+1, sys.name(), err)
			}
			logf("pair %d: %s (CPU: %v ingest, %v delivery)", i+1, r.line(), r.ingestCPU, r.deliverCPU)
			pr = append(pr, r)
		}
		pairs = append(pairs, pr)
	}
	m.loadEnd = hostinfo.LoadAvg()
	m.end = time.Now().UTC()
	rep := report(o, m, pairs)
	fmt.Print(rep)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(rep), 0o644); err != nil {
			return err
		}
	}
	if o.doc != "" {
		if err := writeDoc(o.doc, rep); err != nil {
			return fmt.Errorf("writing %s: %w", o.doc, err)
		}
		logf("wrote the section into %s", o.doc)
	}
	return nil
}

func findPgBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i], nil
		}
	}
	return "", fmt.Errorf("no PostgreSQL server under /usr/lib/postgresql/*/bin (Debian: apt-get install postgresql); or pass -pg-bin")
}

// result is one system's measurement.
type result struct {
	sys                     string
	ingest                  ingestResult
	ingestCPU               time.Duration
	delivered, dups         int
	deliverTime, deliverCPU time.Duration
	// deliverWait is from the release to the last delivery; deliverTime
	// from the first delivery to the last.
	deliverWait time.Duration
	lat         latencyResult
}

type pair []result

func perSec(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func perHook(cpu time.Duration, n int) float64 {
	if n == 0 {
		return 0
	}
	return float64(cpu.Microseconds()) / float64(n)
}

func (r result) ingestRate() float64  { return perSec(r.ingest.accepted, r.ingest.elapsed) }
func (r result) deliverRate() float64 { return perSec(r.delivered, r.deliverTime) }
func (r result) ingestUS() float64    { return perHook(r.ingestCPU, r.ingest.accepted) }
func (r result) deliverUS() float64   { return perHook(r.deliverCPU, r.delivered) }

func (r result) line() string {
	return fmt.Sprintf("%s: ingest %d accepted (%d refused, %d failed) %.0f/s, %.0f µs CPU each; delivered %d (%d twice) %.0f/s, %.0f µs CPU each; %v after the release; POST→delivery p50 %s p99 %s, accept→delivery p99 %s (%d of %d, %d before the answer)",
		r.sys, r.ingest.accepted, r.ingest.refused, r.ingest.failed, r.ingestRate(), r.ingestUS(),
		r.delivered, r.dups, r.deliverRate(), r.deliverUS(), r.deliverWait.Round(time.Millisecond),
		msStr(r.lat.postP50), msStr(r.lat.postP99), msStr(r.lat.acceptP99), r.lat.delivered, r.lat.sent, r.lat.early)
}

func msStr(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

// measure runs the three parts against sys, started fresh in its own
// directory, and stops it.
func measure(ctx context.Context, o options, s *sink, sys system, gen *int) (result, error) {
	r := result{sys: sys.name()}
	dir, err := os.MkdirTemp(o.work, sys.name()+"-")
	if err != nil {
		return r, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return r, err
	}
	defer func() {
		sys.stop()
		if !o.keep {
			os.RemoveAll(dir)
		}
	}()
	p, err := sys.start(ctx, dir, s.addr, o.conns)
	if err != nil {
		return r, err
	}
	*gen++
	allIn := s.expect(*gen, o.n)
	c0 := sys.cpu()
	r.ingest = p.ingest(ctx, *gen, o.n, o.conns)
	c1 := sys.cpu()
	r.ingestCPU = c1 - c0
	if r.ingest.accepted == 0 {
		return r, fmt.Errorf("no webhook accepted: %s", r.ingest.firstErr)
	}
	if r.ingest.accepted < o.n {
		logf("%s accepted %d of %d; first error: %s", sys.name(), r.ingest.accepted, o.n, r.ingest.firstErr)
	}

	t0 := time.Now()
	if err := sys.release(ctx); err != nil {
		return r, err
	}
	select {
	case <-allIn:
	case <-time.After(o.deliverLimit):
		logf("%s: not every webhook delivered after %v", sys.name(), o.deliverLimit)
	case <-ctx.Done():
		return r, ctx.Err()
	}
	r.deliverWait = time.Since(t0)
	r.deliverTime = s.spread()
	r.deliverCPU = sys.cpu() - c1
	r.delivered, r.dups = s.count()

	p.client.CloseIdleConnections()
	*gen++
	r.lat, err = p.latency(ctx, s, *gen, o.rate, o.latencyFor, 60*time.Second)
	return r, err
}

// machine describes where and when the run happened.
type machine struct {
	start, end         time.Time
	nproc              int
	cpuModel, mem      string
	kernel, goVersion  string
	fs, disk           string
	loadStart, loadEnd string
	commit             string
	webhookx, pg, red  string
}

func firstLine(b []byte) string {
	l, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return l
}

func describeMachine(o options) *machine {
	m := &machine{start: time.Now().UTC(), nproc: runtime.NumCPU(), cpuModel: "?", mem: "?", goVersion: runtime.Version(), loadStart: hostinfo.LoadAvg()}
	if c, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(c), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.cpuModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		m.mem = strings.Join(strings.Fields(strings.TrimPrefix(firstLine(b), "MemTotal:")), " ")
	}
	k, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	m.kernel = strings.TrimSpace(string(k))
	m.fs = hostinfo.FSType(o.work)
	m.disk = diskProbe(o.work, 3*time.Second)
	c, _ := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	m.commit = strings.TrimSpace(string(c))
	if d, _ := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); len(d) > 0 {
		m.commit += " (with uncommitted changes)"
	}
	wv, _ := exec.Command(o.webhookx, "version").CombinedOutput()
	m.webhookx = firstLine(wv)
	pv, _ := exec.Command(filepath.Join(o.pgBin, "postgres"), "--version").CombinedOutput()
	m.pg = firstLine(pv)
	rv, _ := exec.Command("redis-server", "--version").CombinedOutput()
	m.red = firstLine(rv)
	return m
}

func (m *machine) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "nproc=%d  cpu=%q  mem=%s  kernel=%s  %s\n", m.nproc, m.cpuModel, m.mem, m.kernel, m.goVersion)
	fmt.Fprintf(&b, "stores on: %s; %s\n", m.fs, m.disk)
	fmt.Fprintf(&b, "hookpace at %s; %s; %s; %s\n", m.commit, m.webhookx, m.pg, m.red)
	fmt.Fprintf(&b, "load average: %s at the start", m.loadStart)
	if m.loadEnd != "" {
		fmt.Fprintf(&b, ", %s at the end", m.loadEnd)
	}
	b.WriteString("\n")
	return b.String()
}

// diskProbe reports hostinfo.ProbeDisk's latencies in dir, syncing back
// to back for d: the floor under every durable write both systems make.
func diskProbe(dir string, d time.Duration) string {
	p, err := hostinfo.ProbeDisk(dir, d, 0)
	if err != nil {
		return "disk probe failed: " + err.Error()
	}
	lat := p.Sorted()
	n := len(lat)
	return fmt.Sprintf("write+fdatasync of 22 KB there: p50 %s, p99 %s (%d in %v)", msStr(lat[n/2]), msStr(lat[n*99/100]), n, d)
}
