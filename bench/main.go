// Command bench measures hookpace against the performance targets in
// one run and prints one table:
//
//  1. durable ingest: 1 KiB POSTs over 64 connections through hookpace
//     versus a no-op Go HTTP server (reads the body, answers 202), with the
//     same load generator and the same request bytes (absolute form); plus
//     p99 latency at half of hookpace's measured maximum (open loop);
//  2. replay: N queued webhooks to a fast local receiver versus a plain Go
//     client posting the same N bodies with the same concurrency;
//  3. RSS: idle after start, and with 200,000 1 KiB webhooks queued;
//  4. pacing: the most sends the receiver saw in any window W against
//     B + R·W, and the achieved rate against R.
//
// Run it from the module root:
//
//	go run ./bench            # full run (7-10 minutes on 2 cores)
//	go run ./bench -quick     # smaller, shorter: a smoke test
//	go run ./bench -only ingest -profile /tmp/hookpace.cpu.pprof
//
// It builds ./cmd/hookpace (or tests -binary) and starts every process it
// measures itself: hookpace on a fresh spool per measurement, and the no-op
// server and receivers as separate processes (this program run with
// -role sink). wrk (apt-get install wrk) is used for the ingest maximum when
// installed; the built-in Go generator always runs as well.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"
)

var (
	role          = flag.String("role", "", "internal: run as a helper process (sink)")
	sinkListeners = flag.Int("sink-listeners", 1, "internal: sink listeners")
	sinkStatus    = flag.Int("sink-status", 202, "internal: sink answer status")
	sinkRecord    = flag.String("sink-record", "none", "internal: sink recording (none|last|all)")

	binaryFlag  = flag.String("binary", "", "hookpace binary to test (default: build ./cmd/hookpace)")
	quick       = flag.Bool("quick", false, "smaller and shorter runs (a smoke test, not the measurement)")
	onlyFlag    = flag.String("only", "ingest,replay,rss,pacing", "comma-separated sections to run")
	genFlag     = flag.String("gen", "auto", "ingest load generators, comma-separated: wrk, go (raw keep-alive TCP), gohttp (net/http Transport via proxy); auto = wrk,go (go alone without wrk)")
	connsFlag   = flag.Int("conns", 64, "ingest: connections")
	durFlag     = flag.Duration("d", 0, "ingest: length of each measured run (default 10s; -quick 4s)")
	repsFlag    = flag.Int("reps", 0, "repetitions of the ingest and replay measurements (default 2; -quick 1)")
	logLevel    = flag.String("log-level", "warn", "hookpace log.level for the measurements")
	infoRow     = flag.Bool("info-row", true, "ingest: also measure hookpace at log.level info (the product default), with wrk")
	nFlag       = flag.Int("n", 0, "replay: webhooks (default 50000; -quick 10000)")
	cFlag       = flag.Int("c", 64, "replay: concurrency of hookpace's host and of the plain client")
	queuedFlag  = flag.Int("queued", 0, "RSS: webhooks to queue behind a 1/s host (default 200000; -quick 50000)")
	pacingFlag  = flag.Duration("pacing-backlog", 0, "pacing: backlog per host, in time at its rate (default 15s; -quick 6s)")
	workFlag    = flag.String("workdir", "", "parent dir for spools and scratch files (default $TMPDIR); must be a real disk for fsync to mean anything")
	keepFlag    = flag.Bool("keep", false, "keep spool dirs and logs")
	profileFlag = flag.String("profile", "", "after the ingest section, CPU-profile hookpace (built from ./bench/pprofwrap) during a wrk ingest run and write the profile here")
	outFlag     = flag.String("out", "", "also write the report to this file")
	quietFlag   = flag.Float64("quiet", 0.35, "before each measured run, wait until other processes plus hypervisor steal take fewer than this many cores (0: don't wait)")
	disturbFlag = flag.Float64("disturbed", 0.3, "a measured run during which other processes plus hypervisor steal took more than this many cores is repeated (see -retries) and flagged with !")
	retriesFlag = flag.Int("retries", 2, "repeats of a disturbed run; the least disturbed attempt is kept")
	quietWait   = flag.Duration("quiet-wait", 90*time.Second, "longest wait for -quiet before measuring anyway")
)

const bodySize = 1024

func main() {
	flag.Parse()
	if *role == "sink" {
		sinkMain(*sinkListeners, *sinkStatus, *sinkRecord)
		return
	}
	quietThreshold, quietWaitMax = *quietFlag, *quietWait
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// settings resolved from the flags
type settings struct {
	dur      time.Duration
	reps     int
	n        int
	queued   int
	backlog  time.Duration
	gens     []string
	sections map[string]bool
}

type bench struct {
	settings
	root, bin, work string
	body            []byte
	rep             *report
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
}

func run() error {
	s := settings{dur: 10 * time.Second, reps: 2, n: 50000, queued: 200000, backlog: 15 * time.Second}
	if *quick {
		s = settings{dur: 4 * time.Second, reps: 1, n: 10000, queued: 50000, backlog: 6 * time.Second}
	}
	if *durFlag > 0 {
		s.dur = *durFlag
	}
	if *repsFlag > 0 {
		s.reps = *repsFlag
	}
	if *nFlag > 0 {
		s.n = *nFlag
	}
	if *queuedFlag > 0 {
		s.queued = *queuedFlag
	}
	if *pacingFlag > 0 {
		s.backlog = *pacingFlag
	}
	s.sections = map[string]bool{}
	for _, x := range strings.Split(*onlyFlag, ",") {
		s.sections[strings.TrimSpace(x)] = true
	}
	if *genFlag == "auto" {
		s.gens = []string{"go"}
		if haveWrk() {
			s.gens = []string{"wrk", "go"}
		}
	} else {
		for _, g := range strings.Split(*genFlag, ",") {
			switch g = strings.TrimSpace(g); g {
			case "wrk", "go", "gohttp":
				s.gens = append(s.gens, g)
			default:
				return fmt.Errorf("-gen: unknown generator %q (wrk, go, gohttp)", g)
			}
		}
	}
	if slices.Contains(s.gens, "wrk") && !haveWrk() {
		return fmt.Errorf("wrk is not installed (apt-get update && apt-get install -y wrk), or use -gen go")
	}

	root, err := moduleRoot()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp(*workFlag, "hookpace-bench-")
	if err != nil {
		return err
	}
	if !*keepFlag {
		defer os.RemoveAll(work)
	}
	b := &bench{settings: s, root: root, work: work, body: makeBody(), rep: &report{conns: *connsFlag, dur: s.dur}}
	b.bin = *binaryFlag
	if b.bin == "" {
		b.bin = filepath.Join(work, "hookpace")
		logf("building ./cmd/hookpace")
		if err := goBuild(root, b.bin, "./cmd/hookpace"); err != nil {
			return err
		}
	}
	b.rep.header = machineInfo(root, work, b)
	fmt.Fprint(os.Stderr, b.rep.header)

	if !haveWrk() {
		logf("NOTE: wrk is not installed; the ingest maximum is measured with the Go generator only (apt-get install -y wrk)")
	}
	if s.sections["ingest"] {
		if err := b.ingest(); err != nil {
			return fmt.Errorf("ingest: %w", err)
		}
		if *profileFlag != "" {
			if err := b.profile(*profileFlag); err != nil {
				return fmt.Errorf("profile: %w", err)
			}
		}
	}
	if s.sections["replay"] {
		if err := b.replay(); err != nil {
			return fmt.Errorf("replay: %w", err)
		}
	}
	if s.sections["rss"] {
		if err := b.rss(); err != nil {
			return fmt.Errorf("rss: %w", err)
		}
	}
	if s.sections["pacing"] {
		if err := b.pacing(); err != nil {
			return fmt.Errorf("pacing: %w", err)
		}
	}
	o, st := othersCores(3 * time.Second)
	b.rep.loadEnd = fmt.Sprintf("%s; other processes using %.2f cores, steal %.2f (3s sample)", loadavg(), o, st)
	out := b.rep.String()
	fmt.Print(out)
	if *outFlag != "" {
		return os.WriteFile(*outFlag, []byte(out), 0o644)
	}
	return nil
}

// makeBody is a 1 KiB JSON webhook body.
func makeBody() []byte {
	var b bytes.Buffer
	b.WriteString(`{"event":"invoice.paid","id":"evt_0123456789","data":"`)
	for b.Len() < bodySize-2 {
		b.WriteByte('a' + byte(b.Len()%26))
	}
	b.WriteString(`"}`)
	return b.Bytes()
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			bytes.Contains(b, []byte("module github.com/hookpace/hookpace\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("run from inside the hookpace module (go run ./bench)")
		}
		dir = parent
	}
}

func goBuild(root, out, pkg string) error {
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// 1. Ingest

type ingestRow struct {
	gen, target string
	rep         int
	res         *loadResult
	cpu         cpuSplit // CPU during the measured run
	srvRejected float64  // hookpace: ingest outcomes other than accepted (whole process life)
	ratio       float64  // req/s over the same rep's no-op req/s (hookpace rows)
	dist        float64  // cores taken by other processes and steal during the run
	tries       int
}

type halfRow struct {
	target string
	rep    int
	res    *loadResult
	lag    time.Duration // p99 of the generator's scheduling lateness
	cpu    cpuSplit
	dist   float64
	tries  int
	disk   *diskSample // probed during the no-op's run, which leaves the disk alone
}

func (b *bench) ingest() error {
	noop, err := startSink(1, http.StatusAccepted, "none")
	if err != nil {
		return err
	}
	defer noop.stop()
	recv, err := startSink(1, http.StatusOK, "none")
	if err != nil {
		return err
	}
	defer recv.stop()
	recvKey := recv.addrs[0]
	target := "http://" + recvKey + "/hook"
	script := ""
	if slices.Contains(b.gens, "wrk") || *infoRow && haveWrk() {
		if script, err = wrkScript(b.work, target, b.body); err != nil {
			return err
		}
	}
	// hookpace's deliveries to the receiver are paused for the whole
	// measurement; its spool is fresh and far from backpressure.
	startHP := func(level string) (*hookpace, error) {
		hp, err := startHookpace(b.bin, b.work, "ingest", hpConfig{logLevel: level, bigSpool: true,
			hosts: []hostCfg{{key: recvKey, rate: "1/s", burst: 1, concurrency: 1}}})
		if err != nil {
			return nil, err
		}
		if err := hp.pause(recvKey); err != nil {
			hp.cleanup(*keepFlag)
			return nil, err
		}
		return hp, nil
	}
	req, err := rawRequest(target, b.body)
	if err != nil {
		return err
	}
	measure := func(gen, server string, pid int) (*loadResult, cpuSplit, error) {
		warm := time.Second
		var res *loadResult
		var err error
		switch gen {
		case "wrk":
			if _, err = runWrk(server, script, 2, *connsFlag, warm); err != nil {
				return nil, cpuSplit{}, err
			}
			waitQuiet("ingest")
			m := startCPU(pid)
			res, err = runWrk(server, script, 2, *connsFlag, b.dur)
			if err != nil {
				return nil, cpuSplit{}, err
			}
			return res, m.stop(res.GenCPU), nil
		case "go":
			rawClosedLoop(server, req, *connsFlag, warm)
			waitQuiet("ingest")
			m := startCPU(pid)
			res = rawClosedLoop(server, req, *connsFlag, b.dur)
			return res, m.stop(0), nil
		default: // gohttp
			closedLoop(server, target, b.body, *connsFlag, warm)
			waitQuiet("ingest")
			m := startCPU(pid)
			res = closedLoop(server, target, b.body, *connsFlag, b.dur)
			res.Gen = "gohttp"
			return res, m.stop(0), nil
		}
	}
	runHP := func(gen, level string, rep int) (*ingestRow, error) {
		hp, err := startHP(level)
		if err != nil {
			return nil, err
		}
		defer hp.cleanup(*keepFlag)
		res, cpu, err := measure(gen, hp.proxy, hp.pid())
		if err != nil {
			return nil, err
		}
		row := &ingestRow{gen: gen, target: "hookpace", rep: rep, res: res, cpu: cpu, dist: cpu.disturbance(res.Elapsed)}
		if level != *logLevel {
			row.target = "hookpace log=" + level
		}
		oc, err := hp.ingestOutcomes()
		if err != nil {
			return nil, err
		}
		for k, v := range oc {
			if k != "accepted" {
				row.srvRejected += v
			}
		}
		return row, nil
	}
	// Check once that the generators really send absolute-form requests:
	// the no-op server records the first request-target it got.
	checked := false
	for rep := 1; rep <= b.reps; rep++ {
		var wrkHP *ingestRow
		for _, gen := range b.gens {
			logf("ingest rep %d: %s -> no-op server", rep, gen)
			base, err := attempt("no-op", func() (*ingestRow, float64, error) {
				res, cpu, err := measure(gen, noop.addrs[0], noop.pid())
				if err != nil {
					return nil, 0, err
				}
				r := &ingestRow{gen: gen, target: "no-op", rep: rep, res: res, cpu: cpu}
				r.dist = cpu.disturbance(res.Elapsed)
				return r, r.dist, nil
			}, func(r *ingestRow, n int) { r.tries = n })
			if err != nil {
				return err
			}
			b.rep.ingest = append(b.rep.ingest, base)
			if !checked {
				st, err := sinkStatsOf(noop.addrs[0])
				if err != nil {
					return err
				}
				b.rep.requestLine = fmt.Sprintf("POST %s (Host: %s)", st.FirstURI, st.FirstHost)
				if !strings.HasPrefix(st.FirstURI, "http://") {
					return fmt.Errorf("%s sent an origin-form request (%q), not absolute-form", gen, st.FirstURI)
				}
				checked = true
			}
			// measure runs hookpace at level against the no-op row base.
			measure := func(label, level string) (*ingestRow, error) {
				row, err := attempt(label, func() (*ingestRow, float64, error) {
					r, err := runHP(gen, level, rep)
					if err != nil {
						return nil, 0, err
					}
					return r, r.dist, nil
				}, func(r *ingestRow, n int) { r.tries = n })
				if err != nil {
					return nil, err
				}
				row.ratio = row.res.RPS() / base.res.RPS()
				b.rep.ingest = append(b.rep.ingest, row)
				return row, nil
			}
			logf("ingest rep %d: %s -> hookpace", rep, gen)
			row, err := measure("hookpace", *logLevel)
			if err != nil {
				return err
			}
			if gen == "wrk" {
				wrkHP = row
				if *infoRow && *logLevel != "info" {
					logf("ingest rep %d: wrk -> hookpace at log.level info", rep)
					if _, err := measure("hookpace log=info", "info"); err != nil {
						return err
					}
				}
			}
			if wrkHP == nil {
				wrkHP = row
			}
		}
		// p99 at half of hookpace's measured maximum, open loop.
		b.rep.halfGen = wrkHP.gen
		rate := math.Max(1, math.Round(wrkHP.res.RPS()/2))
		logf("ingest rep %d: open loop at %.0f/s -> hookpace", rep, rate)
		h, err := attempt("half load hookpace", func() (*halfRow, float64, error) {
			hp, err := startHP(*logLevel)
			if err != nil {
				return nil, 0, err
			}
			defer hp.cleanup(*keepFlag)
			waitQuiet("half load")
			m := startCPU(hp.pid())
			res, lag := rawOpenLoop(hp.proxy, req, *connsFlag, rate, b.dur)
			cpu := m.stop(0)
			r := &halfRow{target: "hookpace", rep: rep, res: res, lag: lag, cpu: cpu, dist: cpu.disturbance(res.Elapsed)}
			return r, r.dist, nil
		}, func(r *halfRow, n int) { r.tries = n })
		if err != nil {
			return err
		}
		b.rep.half = append(b.rep.half, h)
		logf("ingest rep %d: open loop at %.0f/s -> no-op server", rep, rate)
		h, err = attempt("half load no-op", func() (*halfRow, float64, error) {
			waitQuiet("half load")
			m := startCPU(noop.pid())
			// The disk's own stalls, in the same rep: a sync every 2 ms
			// while the no-op server (which never touches the disk) runs.
			var disk *diskSample
			probed := make(chan struct{})
			go func() {
				defer close(probed)
				disk, _ = probeDisk(b.work, b.dur, 2*time.Millisecond)
			}()
			res, lag := rawOpenLoop(noop.addrs[0], req, *connsFlag, rate, b.dur)
			cpu := m.stop(0)
			<-probed
			r := &halfRow{target: "no-op", rep: rep, res: res, lag: lag, cpu: cpu, dist: cpu.disturbance(res.Elapsed), disk: disk}
			return r, r.dist, nil
		}, func(r *halfRow, n int) { r.tries = n })
		if err != nil {
			return err
		}
		b.rep.half = append(b.rep.half, h)
	}
	return nil
}

// profile runs hookpace built with net/http/pprof (bench/pprofwrap) under
// wrk and saves a CPU profile of the middle of the run, then prints the top
// of it.
func (b *bench) profile(path string) error {
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
	hp, err := startHookpace(bin, b.work, "profile", hpConfig{logLevel: *logLevel, bigSpool: true,
		hosts:    []hostCfg{{key: recv.addrs[0], rate: "1/s", burst: 1, concurrency: 1}},
		extraEnv: []string{"HOOKPACE_PPROF=" + pp}})
	if err != nil {
		return err
	}
	defer hp.cleanup(*keepFlag)
	if err := hp.pause(recv.addrs[0]); err != nil {
		return err
	}
	dur := max(b.dur, 10*time.Second) + 2*time.Second
	waitQuiet("profile")
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
	res, err := runWrk(hp.proxy, script, 2, *connsFlag, dur)
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

// attempt runs f, and again up to -retries times while the run was
// disturbed (other processes plus steal above -disturbed cores); it keeps
// the least disturbed result and records the number of tries with setTries.
func attempt[T any](what string, f func() (T, float64, error), setTries func(T, int)) (T, error) {
	var best T
	bestD := math.Inf(1)
	n := 0
	for try := 0; try <= *retriesFlag; try++ {
		r, d, err := f()
		if err != nil {
			return r, err
		}
		n++
		if d < bestD {
			best, bestD = r, d
		}
		if d <= *disturbFlag {
			break
		}
		if try < *retriesFlag {
			logf("%s: disturbed (other processes + steal %.2f cores); measuring again", what, d)
		}
	}
	setTries(best, n)
	return best, nil
}

func (c cpuSplit) disturbance(el time.Duration) float64 {
	if el <= 0 {
		return 0
	}
	return (c.others + c.steal).Seconds() / el.Seconds()
}

func mark(d float64) string {
	if d > *disturbFlag {
		return "!"
	}
	return ""
}

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
	for rep := 1; rep <= b.reps; rep++ {
		row, err := attempt("replay", func() (*replayRow, float64, error) {
			r, err := b.replayOnce(rep)
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

func (b *bench) replayOnce(rep int) (*replayRow, error) {
	c := *cFlag
	sink, err := startSink(2, http.StatusOK, "last")
	if err != nil {
		return nil, err
	}
	defer sink.stop()
	hpRecv, plainRecv := sink.addrs[0], sink.addrs[1]
	hp, err := startHookpace(b.bin, b.work, "replay", hpConfig{logLevel: *logLevel, bigSpool: true,
		hosts: []hostCfg{{key: hpRecv, rate: "1000000/s", burst: 1000, concurrency: c}}})
	if err != nil {
		return nil, err
	}
	defer hp.cleanup(*keepFlag)
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
	waitQuiet("replay")
	logf("replay rep %d: resume; hookpace delivers %d with concurrency %d", rep, b.n, c)
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
	row.hpElapsed = time.Duration(st.LastNS - t0.UnixNano())
	row.hpOthers, row.hpSteal = dist.stop()
	row.hpCount = st.Count
	row.hpRate = float64(want) / row.hpElapsed.Seconds()
	hp.kill() // so that it takes no CPU from the baseline

	waitQuiet("replay")
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
	cfg := hpConfig{logLevel: *logLevel, hosts: []hostCfg{{key: host, rate: "1/s", burst: 1, concurrency: 1}}}
	hp, err := startHookpace(b.bin, b.work, "rss", cfg)
	if err != nil {
		return err
	}
	defer hp.cleanup(*keepFlag)
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

// 4. Pacing

type pacingCase struct {
	rate  string
	perS  float64
	burst int
}

type windowCheck struct {
	w     float64
	max   int
	bound float64
	slack float64 // seconds of arrival-time compression that would explain an excess
}

type pacingResult struct {
	c          pacingCase
	n          int
	got        int
	windows    []windowCheck
	steadyRate float64 // (N-1-B) / (t[N-1] - t[B])
	overall    float64 // N / (t[N-1] - resume)
}

func (b *bench) pacing() error {
	cases := []pacingCase{{"200/s", 200, 20}, {"50/s", 50, 5}, {"600/m", 10, 10}}
	sink, err := startSink(len(cases), http.StatusOK, "all")
	if err != nil {
		return err
	}
	defer sink.stop()
	var hosts []hostCfg
	for i, c := range cases {
		hosts = append(hosts, hostCfg{key: sink.addrs[i], rate: c.rate, burst: c.burst, concurrency: 8})
	}
	hp, err := startHookpace(b.bin, b.work, "pacing", hpConfig{logLevel: *logLevel, bigSpool: true, hosts: hosts})
	if err != nil {
		return err
	}
	defer hp.cleanup(*keepFlag)
	total := 0
	ns := make([]int, len(cases))
	for i, c := range cases {
		if err := hp.pause(sink.addrs[i]); err != nil {
			return err
		}
		ns[i] = c.burst + int(c.perS*b.backlog.Seconds())
		logf("pacing: queueing %d webhooks for a %s burst %d host (paused)", ns[i], c.rate, c.burst)
		bad, err := postN(hp.proxy, "http://"+sink.addrs[i]+"/hook", b.body, ns[i], 16)
		if bad > 0 {
			return fmt.Errorf("prefill: %d not accepted (%v)", bad, err)
		}
		total += ns[i]
	}
	if err := hp.waitQueued(int64(total), time.Minute); err != nil {
		return err
	}
	waitQuiet("pacing")
	dist := startDisturbance()
	logf("pacing: resume all; about %v of sends", b.backlog)
	resumed := make([]time.Time, len(cases))
	for i := range cases {
		resumed[i] = time.Now()
		if err := hp.resume(sink.addrs[i]); err != nil {
			return err
		}
	}
	for i, c := range cases {
		if _, err := waitCount(sink.addrs[i], int64(ns[i]), 2*b.backlog+time.Minute); err != nil {
			return err
		}
		times, err := sinkTimes(sink.addrs[i])
		if err != nil {
			return err
		}
		slices.Sort(times)
		r := &pacingResult{c: c, n: ns[i], got: len(times)}
		for _, w := range []float64{0.1, 1, 5} {
			n := maxInWindow(times, w)
			bound := float64(c.burst) + c.perS*w
			r.windows = append(r.windows, windowCheck{w: w, max: n, bound: bound, slack: max(0, (float64(n)-bound)/c.perS)})
		}
		n, B := len(times), c.burst
		if n > B+1 {
			r.steadyRate = float64(n-1-B) / (float64(times[n-1]-times[B]) / 1e9)
		}
		r.overall = float64(n) / (float64(times[n-1]-resumed[i].UnixNano()) / 1e9)
		b.rep.pacing = append(b.rep.pacing, r)
	}
	b.rep.pacingOthers, b.rep.pacingSteal = dist.stop()
	return nil
}

// maxInWindow is the most arrivals in any half-open window [t, t+w); the
// maximum is reached by a window that starts at an arrival.
func maxInWindow(times []int64, w float64) int {
	span := int64(w * 1e9)
	best, j := 0, 0
	for i := range times {
		for j < len(times) && times[j]-times[i] < span {
			j++
		}
		best = max(best, j-i)
	}
	return best
}

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
		b.dur, b.reps, *connsFlag, len(b.body), *logLevel, b.gens, b.n, *cFlag, b.queued, b.backlog)
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

// report

type report struct {
	header       string
	requestLine  string
	ingest       []*ingestRow
	half         []*halfRow
	replay       []*replayRow
	rss          *rssResult
	pacing       []*pacingResult
	profile      string
	loadEnd      string
	halfGen      string
	pacingOthers float64
	pacingSteal  float64
	conns        int
	dur          time.Duration
}

// wholeMs lists durations as whole milliseconds, space-separated.
func wholeMs(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = strconv.FormatFloat(float64(d)/1e6, 'f', 0, 64)
	}
	return strings.Join(parts, " ")
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) + "ms" }
func mib(kib int64) string      { return strconv.FormatFloat(float64(kib)/1024, 'f', 1, 64) + " MiB" }
func pct(x float64) string      { return strconv.FormatFloat(100*x, 'f', 1, 64) + "%" }

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func (r *report) String() string {
	var s strings.Builder
	s.WriteString("\n" + r.header)
	type target struct{ name, measured, verdict string }
	var targets []target
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT MET"
	}

	if len(r.ingest) > 0 {
		fmt.Fprintf(&s, "\n1. Durable ingest: 1 KiB POSTs, closed loop, request line %s\n", r.requestLine)
		tw := tabwriter.NewWriter(&s, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "gen\trep\ttarget\treq/s\tp50\tp99\tp99.9\tnon-2xx\tsock err\tsrv rejected\tsrv µs/req\tcores srv/gen/others/kernel/steal\ttries\tvs no-op\t")
		for _, row := range r.ingest {
			ratio, rej := "", ""
			if row.target != "no-op" {
				ratio = pct(row.ratio)
				rej = strconv.FormatFloat(row.srvRejected, 'f', 0, 64)
			}
			cpu := float64(row.cpu.server.Microseconds()) / math.Max(1, float64(row.res.Requests))
			fmt.Fprintf(tw, "%s\t%d\t%s\t%.0f\t%s\t%s\t%s\t%d\t%d\t%s\t%.0f\t%s%s\t%d\t%s\t\n", row.gen, row.rep, row.target, row.res.RPS(),
				ms(row.res.p50), ms(row.res.p99), ms(row.res.p999), row.res.Non2xx, row.res.SockErr, rej, cpu,
				mark(row.dist), cores(row.cpu, row.res.Elapsed), row.tries, ratio)
		}
		tw.Flush()
		s.WriteString("   srv rejected: hookpace_ingest_requests_total outcomes other than accepted, warm-up included.\n")
		s.WriteString("   srv µs/req: user+sys CPU of the server process per request during the measured run.\n")
		s.WriteString("   cores: CPU used during the run by the server process / the load generator / other processes on the machine\n")
		s.WriteString("   (other engineers' builds and tests: high 'others' = a disturbed run) / kernel work charged to no process (softirq)\n")
		s.WriteString("   / time the hypervisor stole from this VM (high steal = a disturbed run).\n")
		fmt.Fprintf(&s, "   ! = still disturbed (others + steal > %.2f cores) after %d retries; such reps are left out of the verdicts when a clean rep exists.\n",
			*disturbFlag, *retriesFlag)

		byGen := map[string][]float64{}
		clean := map[string][]float64{}
		noopDist := map[string]float64{}
		for _, row := range r.ingest {
			if row.target == "no-op" {
				noopDist[row.gen+strconv.Itoa(row.rep)] = row.dist
			}
		}
		bad := int64(0)
		for _, row := range r.ingest {
			if row.target == "hookpace" {
				byGen[row.gen] = append(byGen[row.gen], row.ratio)
				if row.dist <= *disturbFlag && noopDist[row.gen+strconv.Itoa(row.rep)] <= *disturbFlag {
					clean[row.gen] = append(clean[row.gen], row.ratio)
				}
			}
			if strings.HasPrefix(row.target, "hookpace") {
				bad += row.res.Non2xx + row.res.SockErr + int64(row.srvRejected)
			}
		}
		gen := "wrk"
		if _, ok := byGen[gen]; !ok {
			gen = "go"
		}
		pick := func(g string) ([]float64, string) {
			if len(clean[g]) > 0 {
				return clean[g], fmt.Sprintf("%d undisturbed of %d reps", len(clean[g]), len(byGen[g]))
			}
			return byGen[g], "ALL reps disturbed"
		}
		xs, note := pick(gen)
		m := mean(xs)
		targets = append(targets, target{"ingest req/s >= 40% of no-op (" + gen + ", mean of reps)",
			fmt.Sprintf("%s (all reps: %s; %s)", pct(m), joinPct(byGen[gen]), note), verdict(m >= 0.40)})
		for _, g2 := range []string{"go", "gohttp"} {
			if gen != g2 && len(byGen[g2]) > 0 {
				xs, note := pick(g2)
				targets = append(targets, target{"  same with generator " + g2 + " (for reference)",
					fmt.Sprintf("%s (all reps: %s; %s)", pct(mean(xs)), joinPct(byGen[g2]), note), ""})
			}
		}
		targets = append(targets, target{"ingest: no non-2xx (all hookpace runs)", fmt.Sprintf("%d", bad), verdict(bad == 0)})
	}
	if len(r.half) > 0 {
		fmt.Fprintf(&s, "\n   Half load: open loop (Go generator) at half of hookpace's maximum (%s, same rep), %d conns, for %v\n", r.halfGen, r.conns, r.dur)
		tw := tabwriter.NewWriter(&s, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "rep\ttarget\toffered/s\tdone/s\tp50\tp99\tp99.9\tmax\tnon-2xx\tsock err\tgen lag p99\tsrv µs/req\tcores srv/gen/others/kernel/steal\ttries\t")
		var p99s, cleanP99 []float64
		for _, h := range r.half {
			fmt.Fprintf(tw, "%d\t%s\t%.0f\t%.0f\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%.0f\t%s%s\t%d\t\n", h.rep, h.target, h.res.Rate, h.res.RPS(),
				ms(h.res.p50), ms(h.res.p99), ms(h.res.p999), ms(h.res.max), h.res.Non2xx, h.res.SockErr, ms(h.lag),
				float64(h.cpu.server.Microseconds())/math.Max(1, float64(h.res.Requests)), mark(h.dist), cores(h.cpu, h.res.Elapsed), h.tries)
			if h.target == "hookpace" {
				p99s = append(p99s, float64(h.res.p99)/1e6)
				if h.dist <= *disturbFlag {
					cleanP99 = append(cleanP99, float64(h.res.p99)/1e6)
				}
			}
		}
		tw.Flush()
		s.WriteString("   latency runs from the scheduler's release of a request (waiting for a free connection counts);\n   gen lag = how late the scheduler released requests (timer granularity), not included.\n")
		for _, h := range r.half {
			fmt.Fprintf(&s, "   rep %d %s: worst latency in each second of the run, ms: %s\n", h.rep, h.target, wholeMs(h.res.secMax))
			if h.disk != nil && len(h.disk.lat) > 0 {
				fmt.Fprintf(&s, "   rep %d disk, probed during the no-op run (22 KB write+fdatasync every 2ms): worst sync in each second, ms: %s; %d of %d over 10ms\n",
					h.rep, wholeMs(h.disk.secMax), h.disk.over(10*time.Millisecond), len(h.disk.lat))
			}
		}
		xs, note := cleanP99, fmt.Sprintf("%d undisturbed of %d reps", len(cleanP99), len(p99s))
		if len(xs) == 0 {
			xs, note = p99s, "ALL reps disturbed"
		}
		m := mean(xs)
		targets = append(targets, target{"p99 at half load <= 10 ms (mean of reps)",
			fmt.Sprintf("%.2f ms (all reps: %s; %s)", m, joinMs(p99s), note), verdict(m <= 10)})
	}
	if len(r.replay) > 0 {
		s.WriteString("\n2. Replay: N queued 1 KiB webhooks to a local receiver (host rate 1000000/s, burst 1000), from resume to the last arrival,\n   versus a plain Go http.Client (keep-alive) posting the same N bodies with the same concurrency\n")
		tw := tabwriter.NewWriter(&s, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "rep\tN\thookpace\treq/s\tsrv CPU µs/msg\tplain client\treq/s\tratio\treceived (hp/plain)\tothers' cores hp/plain\tsteal hp/plain\ttries\t")
		var ratios, cleanR []float64
		for _, x := range r.replay {
			ratio := x.hpRate / x.plRate
			ratios = append(ratios, ratio)
			d := max(x.hpOthers+x.hpSteal, x.plOthers+x.plSteal)
			if d <= *disturbFlag {
				cleanR = append(cleanR, ratio)
			}
			n := x.hpCount
			fmt.Fprintf(tw, "%d\t%d\t%s\t%.0f\t%.0f\t%s\t%.0f\t%s\t%d/%d\t%.2f/%.2f\t%s%.2f/%.2f\t%d\t\n", x.rep, n, x.hpElapsed.Round(time.Millisecond), x.hpRate,
				float64(x.hpCPU.Microseconds())/math.Max(1, float64(n)), x.plainElapsed.Round(time.Millisecond), x.plRate, pct(ratio), x.hpCount, x.plainCount,
				x.hpOthers, x.plOthers, mark(d), x.hpSteal, x.plSteal, x.tries)
			if x.prefillNon2xx > 0 || x.plainNon2xx > 0 {
				fmt.Fprintf(tw, "\t\tprefill non-2xx %d, plain non-2xx %d\t\t\t\t\t\t\t\n", x.prefillNon2xx, x.plainNon2xx)
			}
		}
		tw.Flush()
		xs, note := cleanR, fmt.Sprintf("%d undisturbed of %d reps", len(cleanR), len(ratios))
		if len(xs) == 0 {
			xs, note = ratios, "ALL reps disturbed"
		}
		m := mean(xs)
		targets = append(targets, target{"replay >= 50% of a plain Go client (mean of reps)",
			fmt.Sprintf("%s (all reps: %s; %s)", pct(m), joinPct(ratios), note), verdict(m >= 0.50)})
	}
	if x := r.rss; x != nil {
		s.WriteString("\n3. RSS (VmRSS / VmHWM from /proc/PID/status)\n")
		tw := tabwriter.NewWriter(&s, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "state\tVmRSS\tVmHWM (peak so far)\tspool\t")
		fmt.Fprintf(tw, "idle, 3s after start\t%s\t%s\tempty\t\n", mib(x.idleRSS), mib(x.idleHWM))
		fmt.Fprintf(tw, "%d queued (1/s host), 5s after the last 202\t%s\t%s\t%d msgs, %.0f MiB\t\n", x.queued, mib(x.settledRSS), mib(x.peakHWM),
			x.queuedMsgs, float64(x.queuedBytes)/(1<<20))
		fmt.Fprintf(tw, "same spool after a restart, 5s\t%s\t%s\t%d msgs\t\n", mib(x.restartRSS), mib(x.restartHWM), x.restartMsgs)
		tw.Flush()
		fmt.Fprintf(&s, "   queueing took %v (%.0f/s, 64 conns); %d not accepted; highest VmRSS sampled every 100ms: %s\n",
			x.fillTime.Round(time.Millisecond), float64(x.queued)/x.fillTime.Seconds(), x.fillRejected, mib(x.sampMax))
		targets = append(targets, target{"RSS idle <= 40 MiB", mib(x.idleRSS) + " (VmHWM " + mib(x.idleHWM) + ")", verdict(x.idleRSS <= 40*1024)})
		targets = append(targets, target{fmt.Sprintf("RSS <= 150 MiB with %d queued (peak VmHWM)", x.queued),
			fmt.Sprintf("%s peak, %s settled", mib(x.peakHWM), mib(x.settledRSS)), verdict(x.peakHWM <= 150*1024 && x.queued >= 200000)})
		if x.queued < 200000 {
			targets[len(targets)-1].verdict = "n/a (fewer than 200,000 queued)"
		}
	}
	if len(r.pacing) > 0 {
		s.WriteString("\n4. Pacing: a backlog per host, all resumed at once; arrivals timed at the receiver\n")
		tw := tabwriter.NewWriter(&s, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "rate\tburst\tN\tW\tmax sends in W\tB+R·W\tok\texcess as time\tsteady rate\tof R\toverall rate\t")
		okAll, rateOK := true, true
		var worst float64 = math.Inf(1)
		for _, p := range r.pacing {
			for i, w := range p.windows {
				ok := float64(w.max) <= w.bound
				okAll = okAll && ok
				if i == 0 {
					fmt.Fprintf(tw, "%s\t%d\t%d\t%gs\t%d\t%g\t%v\t%s\t%.2f/s\t%s\t%.2f/s\t\n", p.c.rate, p.c.burst, p.got, w.w, w.max, w.bound, ok,
						ms(time.Duration(w.slack*1e9)), p.steadyRate, pct(p.steadyRate/p.c.perS), p.overall)
				} else {
					fmt.Fprintf(tw, "\t\t\t%gs\t%d\t%g\t%v\t%s\t\t\t\t\n", w.w, w.max, w.bound, ok, ms(time.Duration(w.slack*1e9)))
				}
			}
			f := p.steadyRate / p.c.perS
			worst = math.Min(worst, f)
			rateOK = rateOK && f >= 0.98
		}
		tw.Flush()
		s.WriteString("   steady rate = (N-1-B) / (t[N-1] - t[B]): the rate after the initial burst; overall = N / (last arrival - resume).\n")
		s.WriteString("   excess as time = (max - bound) / R: how much arrival-time jitter (sends bunched up on their way to the receiver)\n")
		fmt.Fprintf(&s, "   would account for an excess. During the pacing run other processes used %.2f cores and steal was %.2f.\n", r.pacingOthers, r.pacingSteal)
		targets = append(targets, target{"pacing: no window W has more than B + R·W sends", verdict(okAll), verdict(okAll)})
		targets = append(targets, target{"pacing: achieved >= 98% of R", "worst " + pct(worst), verdict(rateOK)})
	}

	s.WriteString("\nTargets\n")
	tw := tabwriter.NewWriter(&s, 0, 0, 2, ' ', 0)
	for _, t := range targets {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", t.name, t.measured, t.verdict)
	}
	tw.Flush()
	fmt.Fprintf(&s, "load avg at end: %s\n", r.loadEnd)
	if r.profile != "" {
		s.WriteString("\n" + r.profile)
	}
	return s.String()
}

func cores(c cpuSplit, el time.Duration) string {
	s := el.Seconds()
	if s <= 0 {
		return ""
	}
	return fmt.Sprintf("%.2f/%.2f/%.2f/%.2f/%.2f", c.server.Seconds()/s, c.gen.Seconds()/s, c.others.Seconds()/s, c.rest.Seconds()/s, c.steal.Seconds()/s)
}

func joinPct(xs []float64) string {
	var p []string
	for _, x := range xs {
		p = append(p, pct(x))
	}
	return strings.Join(p, ", ")
}

func joinMs(xs []float64) string {
	var p []string
	for _, x := range xs {
		p = append(p, strconv.FormatFloat(x, 'f', 2, 64))
	}
	return strings.Join(p, ", ")
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
