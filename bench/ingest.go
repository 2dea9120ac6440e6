package main

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/hookpace/hookpace/bench/hostinfo"
)

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
	disk   *hostinfo.DiskSample // probed during the no-op's run, which leaves the disk alone
}

// ingestRig is what every ingest run shares: the no-op server, the
// receiver that hookpace's host points at, and the request to send.
type ingestRig struct {
	noop, recv *sinkProc
	recvKey    string
	target     string // the webhook's URL (at the receiver)
	script     string // wrk's Lua script, when wrk runs
	req        []byte // the raw absolute-form request
}

func (b *bench) newIngestRig() (*ingestRig, error) {
	rig := &ingestRig{}
	var err error
	if rig.noop, err = startSink(1, http.StatusAccepted, "none"); err != nil {
		return nil, err
	}
	if rig.recv, err = startSink(1, http.StatusOK, "none"); err != nil {
		rig.stop()
		return nil, err
	}
	rig.recvKey = rig.recv.addrs[0]
	rig.target = "http://" + rig.recvKey + "/hook"
	if slices.Contains(b.gens, "wrk") || b.infoRow && haveWrk() {
		if rig.script, err = wrkScript(b.work, rig.target, b.body); err != nil {
			rig.stop()
			return nil, err
		}
	}
	if rig.req, err = rawRequest(rig.target, b.body); err != nil {
		rig.stop()
		return nil, err
	}
	return rig, nil
}

func (rig *ingestRig) stop() {
	for _, s := range []*sinkProc{rig.noop, rig.recv} {
		if s != nil {
			s.stop()
		}
	}
}

func (b *bench) ingest() error {
	rig, err := b.newIngestRig()
	if err != nil {
		return err
	}
	defer rig.stop()
	checked := false // that the generators really send absolute-form requests
	for rep := 1; rep <= b.reps; rep++ {
		var maxRow *ingestRow // hookpace's maximum that the half load halves: wrk's, else the first generator's
		for _, gen := range b.gens {
			logf("ingest rep %d: %s -> no-op server", rep, gen)
			base, err := b.ingestNoop(rig, gen, rep)
			if err != nil {
				return err
			}
			if !checked {
				if err := b.checkAbsoluteForm(rig, gen); err != nil {
					return err
				}
				checked = true
			}
			logf("ingest rep %d: %s -> hookpace", rep, gen)
			row, err := b.ingestHookpace(rig, gen, b.logLevel, rep, base)
			if err != nil {
				return err
			}
			if gen == "wrk" {
				maxRow = row
				if b.infoRow && b.logLevel != "info" {
					logf("ingest rep %d: wrk -> hookpace at log.level info", rep)
					if _, err := b.ingestHookpace(rig, gen, "info", rep, base); err != nil {
						return err
					}
				}
			}
			if maxRow == nil {
				maxRow = row
			}
		}
		if err := b.halfLoad(rig, maxRow, rep); err != nil {
			return err
		}
	}
	return nil
}

// startIngestHookpace starts hookpace on a fresh spool, with deliveries
// to the receiver paused for the whole measurement, far from backpressure.
func (b *bench) startIngestHookpace(rig *ingestRig, level string) (*hookpace, error) {
	hp, err := startHookpace(b.bin, b.work, "ingest", hpConfig{logLevel: level, bigSpool: true,
		hosts: []hostCfg{{key: rig.recvKey, rate: "1/s", burst: 1, concurrency: 1}}})
	if err != nil {
		return nil, err
	}
	if err := hp.pause(rig.recvKey); err != nil {
		hp.cleanup(b.keep)
		return nil, err
	}
	return hp, nil
}

// loadServer runs generator gen against server (after a 1s warm-up) for
// the measured run, and meters the CPU of the process pid meanwhile.
func (b *bench) loadServer(rig *ingestRig, gen, server string, pid int) (*loadResult, cpuSplit, error) {
	const warm = time.Second
	switch gen {
	case "wrk":
		if _, err := runWrk(server, rig.script, 2, b.conns, warm); err != nil {
			return nil, cpuSplit{}, err
		}
		b.waitQuiet("ingest")
		m := startCPU(pid)
		res, err := runWrk(server, rig.script, 2, b.conns, b.dur)
		if err != nil {
			return nil, cpuSplit{}, err
		}
		return res, m.stop(res.GenCPU), nil
	case "go":
		rawClosedLoop(server, rig.req, b.conns, warm)
		b.waitQuiet("ingest")
		m := startCPU(pid)
		res := rawClosedLoop(server, rig.req, b.conns, b.dur)
		return res, m.stop(0), nil
	default: // gohttp
		closedLoop(server, rig.target, b.body, b.conns, warm)
		b.waitQuiet("ingest")
		m := startCPU(pid)
		res := closedLoop(server, rig.target, b.body, b.conns, b.dur)
		res.Gen = "gohttp"
		return res, m.stop(0), nil
	}
}

// ingestNoop measures the no-op server with gen: the baseline row.
func (b *bench) ingestNoop(rig *ingestRig, gen string, rep int) (*ingestRow, error) {
	base, err := attempt(b.settings, "no-op", func() (*ingestRow, float64, error) {
		res, cpu, err := b.loadServer(rig, gen, rig.noop.addrs[0], rig.noop.pid())
		if err != nil {
			return nil, 0, err
		}
		r := &ingestRow{gen: gen, target: "no-op", rep: rep, res: res, cpu: cpu}
		r.dist = cpu.disturbance(res.Elapsed)
		return r, r.dist, nil
	}, func(r *ingestRow, n int) { r.tries = n })
	if err != nil {
		return nil, err
	}
	b.rep.ingest = append(b.rep.ingest, base)
	return base, nil
}

// checkAbsoluteForm checks, from the first request-target the no-op
// server recorded, that gen sent an absolute-form request.
func (b *bench) checkAbsoluteForm(rig *ingestRig, gen string) error {
	st, err := sinkStatsOf(rig.noop.addrs[0])
	if err != nil {
		return err
	}
	b.rep.requestLine = fmt.Sprintf("POST %s (Host: %s)", st.FirstURI, st.FirstHost)
	if !strings.HasPrefix(st.FirstURI, "http://") {
		return fmt.Errorf("%s sent an origin-form request (%q), not absolute-form", gen, st.FirstURI)
	}
	return nil
}

// ingestHookpace measures hookpace at log level with gen, against the
// same rep's no-op row base.
func (b *bench) ingestHookpace(rig *ingestRig, gen, level string, rep int, base *ingestRow) (*ingestRow, error) {
	label := "hookpace"
	if level != b.logLevel {
		label = "hookpace log=" + level
	}
	row, err := attempt(b.settings, label, func() (*ingestRow, float64, error) {
		r, err := b.ingestHookpaceOnce(rig, gen, level, rep)
		if err != nil {
			return nil, 0, err
		}
		r.target = label
		return r, r.dist, nil
	}, func(r *ingestRow, n int) { r.tries = n })
	if err != nil {
		return nil, err
	}
	row.ratio = row.res.RPS() / base.res.RPS()
	b.rep.ingest = append(b.rep.ingest, row)
	return row, nil
}

func (b *bench) ingestHookpaceOnce(rig *ingestRig, gen, level string, rep int) (*ingestRow, error) {
	hp, err := b.startIngestHookpace(rig, level)
	if err != nil {
		return nil, err
	}
	defer hp.cleanup(b.keep)
	res, cpu, err := b.loadServer(rig, gen, hp.proxy, hp.pid())
	if err != nil {
		return nil, err
	}
	row := &ingestRow{gen: gen, rep: rep, res: res, cpu: cpu, dist: cpu.disturbance(res.Elapsed)}
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

// halfLoad measures p99 at half of hookpace's measured maximum (top), open
// loop, against hookpace and then the no-op server.
func (b *bench) halfLoad(rig *ingestRig, top *ingestRow, rep int) error {
	b.rep.halfGen = top.gen
	rate := math.Max(1, math.Round(top.res.RPS()/2))
	logf("ingest rep %d: open loop at %.0f/s -> hookpace", rep, rate)
	h, err := attempt(b.settings, "half load hookpace", func() (*halfRow, float64, error) {
		hp, err := b.startIngestHookpace(rig, b.logLevel)
		if err != nil {
			return nil, 0, err
		}
		defer hp.cleanup(b.keep)
		b.waitQuiet("half load")
		m := startCPU(hp.pid())
		res, lag := rawOpenLoop(hp.proxy, rig.req, b.conns, rate, b.dur)
		cpu := m.stop(0)
		r := &halfRow{target: "hookpace", rep: rep, res: res, lag: lag, cpu: cpu, dist: cpu.disturbance(res.Elapsed)}
		return r, r.dist, nil
	}, func(r *halfRow, n int) { r.tries = n })
	if err != nil {
		return err
	}
	b.rep.half = append(b.rep.half, h)
	logf("ingest rep %d: open loop at %.0f/s -> no-op server", rep, rate)
	h, err = attempt(b.settings, "half load no-op", func() (*halfRow, float64, error) {
		return b.halfNoop(rig, rate, rep)
	}, func(r *halfRow, n int) { r.tries = n })
	if err != nil {
		return err
	}
	b.rep.half = append(b.rep.half, h)
	return nil
}

// halfNoop is the no-op server's half-load run, with the disk's own stalls
// probed meanwhile (a sync every 2 ms; the no-op never touches the disk).
func (b *bench) halfNoop(rig *ingestRig, rate float64, rep int) (*halfRow, float64, error) {
	b.waitQuiet("half load")
	m := startCPU(rig.noop.pid())
	var disk *hostinfo.DiskSample
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		disk, _ = hostinfo.ProbeDisk(b.work, b.dur, 2*time.Millisecond)
	}()
	res, lag := rawOpenLoop(rig.noop.addrs[0], rig.req, b.conns, rate, b.dur)
	cpu := m.stop(0)
	<-probed
	r := &halfRow{target: "no-op", rep: rep, res: res, lag: lag, cpu: cpu, dist: cpu.disturbance(res.Elapsed), disk: disk}
	return r, r.dist, nil
}
