package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// report is what the sections measured. String renders the tables, one
// per section, and then the targets with their verdicts (verdicts.go).
type report struct {
	header       string
	requestLine  string
	ingest       []*ingestRow
	half         []*halfRow
	replay       []*replayRow
	rss          *rssResult
	pacing       []*pacingResult
	fleet        []*fleetRow
	sender       []*senderRow
	adaptive     []*adaptiveRow
	inbound      *inboundRow    // inbound.go
	capture      []*captureArm  // capture.go
	reuse        []*reuseResult // reuse.go
	hosts        []*hostsResult // hosts.go
	latency      []*latencyRow  // latency.go
	fairness     []*fairnessRow
	floor        []*floorRow // floor.go
	floorBins    []string
	profile      string
	loadEnd      string
	halfGen      string
	pacingOthers float64
	pacingSteal  float64
	conns        int
	dur          time.Duration
	disturbed    float64 // -disturbed: above this many cores a run is marked
	retries      int     // -retries
}

func (r *report) String() string {
	var s strings.Builder
	s.WriteString("\n" + r.header)
	if len(r.ingest) > 0 {
		r.writeIngest(&s)
	}
	if len(r.half) > 0 {
		r.writeHalf(&s)
	}
	if len(r.floor) > 0 {
		r.writeFloor(&s)
	}
	if len(r.replay) > 0 {
		r.writeReplay(&s)
	}
	if r.rss != nil {
		r.writeRSS(&s)
	}
	if len(r.pacing) > 0 {
		r.writePacing(&s)
	}
	if len(r.fleet) > 0 {
		r.writeFleet(&s)
	}
	if len(r.sender) > 0 {
		r.writeSender(&s)
	}
	if len(r.adaptive) > 0 {
		r.writeAdaptive(&s)
	}
	if len(r.fairness) > 0 {
		r.writeFairness(&s)
	}
	if r.inbound != nil {
		r.writeInbound(&s)
	}
	if len(r.capture) > 0 {
		r.writeCapture(&s)
	}
	if len(r.reuse) > 0 {
		r.writeReuse(&s)
	}
	if len(r.hosts) > 0 {
		r.writeHosts(&s)
	}
	if len(r.latency) > 0 {
		r.writeLatency(&s)
	}
	s.WriteString("\nTargets\n")
	tw := tabwriter.NewWriter(&s, 0, 0, 2, ' ', 0)
	for _, t := range r.targets() {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", t.name, t.measured, t.verdict)
	}
	tw.Flush()
	fmt.Fprintf(&s, "load avg at end: %s\n", r.loadEnd)
	if r.profile != "" {
		s.WriteString("\n" + r.profile)
	}
	return s.String()
}

func table(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
}

// mark flags a run still disturbed after its retries.
func (r *report) mark(d float64) string {
	if d > r.disturbed {
		return "!"
	}
	return ""
}

func (r *report) writeIngest(s io.Writer) {
	fmt.Fprintf(s, "\n1. Durable ingest: 1 KiB POSTs, closed loop, request line %s\n", r.requestLine)
	tw := table(s)
	fmt.Fprintln(tw, "gen\trep\ttarget\treq/s\tp50\tp99\tp99.9\tnon-2xx\tsock err\tsrv rejected\tsrv µs/req\tcores srv/gen/others/kernel/steal\ttries\tvs no-op\t")
	for _, row := range r.ingest {
		ratio, rej := "", ""
		if row.target != "no-op" {
			ratio = pct(row.ratio)
			rej = strconv.FormatFloat(row.srvRejected, 'f', 0, 64)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.0f\t%s\t%s\t%s\t%d\t%d\t%s\t%.0f\t%s%s\t%d\t%s\t\n", row.gen, row.rep, row.target, row.res.RPS(),
			ms(row.res.p50), ms(row.res.p99), ms(row.res.p999), row.res.Non2xx, row.res.SockErr, rej, perReq(row.cpu.server, row.res.Requests),
			r.mark(row.dist), cores(row.cpu, row.res.Elapsed), row.tries, ratio)
	}
	tw.Flush()
	io.WriteString(s, "   srv rejected: hookpace_ingest_requests_total outcomes other than accepted, warm-up included.\n"+
		"   srv µs/req: user+sys CPU of the server process per request during the measured run.\n"+
		"   cores: CPU used during the run by the server process / the load generator / other processes on the machine\n"+
		"   (other engineers' builds and tests: high 'others' = a disturbed run) / kernel work charged to no process (softirq)\n"+
		"   / time the hypervisor stole from this VM (high steal = a disturbed run).\n")
	fmt.Fprintf(s, "   ! = still disturbed (others + steal > %.2f cores) after %d retries; such reps are left out of the verdicts when a clean rep exists.\n",
		r.disturbed, r.retries)
}

func (r *report) writeHalf(s io.Writer) {
	fmt.Fprintf(s, "\n   Half load: open loop (Go generator) at half of hookpace's maximum (%s, same rep), %d conns, for %v\n", r.halfGen, r.conns, r.dur)
	tw := table(s)
	fmt.Fprintln(tw, "rep\ttarget\toffered/s\tdone/s\tp50\tp99\tp99.9\tmax\tnon-2xx\tsock err\tgen lag p99\tsrv µs/req\tcores srv/gen/others/kernel/steal\ttries\t")
	for _, h := range r.half {
		fmt.Fprintf(tw, "%d\t%s\t%.0f\t%.0f\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%.0f\t%s%s\t%d\t\n", h.rep, h.target, h.res.Rate, h.res.RPS(),
			ms(h.res.p50), ms(h.res.p99), ms(h.res.p999), ms(h.res.max), h.res.Non2xx, h.res.SockErr, ms(h.lag),
			perReq(h.cpu.server, h.res.Requests), r.mark(h.dist), cores(h.cpu, h.res.Elapsed), h.tries)
	}
	tw.Flush()
	io.WriteString(s, "   latency runs from the scheduler's release of a request (waiting for a free connection counts);\n   gen lag = how late the scheduler released requests (timer granularity), not included.\n")
	for _, h := range r.half {
		fmt.Fprintf(s, "   rep %d %s: worst latency in each second of the run, ms: %s\n", h.rep, h.target, wholeMs(h.res.secMax))
		if h.disk != nil && len(h.disk.Lat) > 0 {
			fmt.Fprintf(s, "   rep %d disk, probed during the no-op run (22 KB write+fdatasync every 2ms): worst sync in each second, ms: %s; %d of %d over 10ms\n",
				h.rep, wholeMs(h.disk.SecMax), h.disk.Over(10*time.Millisecond), len(h.disk.Lat))
		}
	}
}

func (r *report) writeReplay(s io.Writer) {
	io.WriteString(s, "\n2. Replay: N queued 1 KiB webhooks to a local receiver (host rate 1000000/s, burst 1000), from resume to the last arrival,\n   versus a plain Go http.Client (keep-alive) posting the same N bodies with the same concurrency\n")
	tw := table(s)
	fmt.Fprintln(tw, "rep\tN\thookpace\treq/s\tsrv CPU µs/msg\tplain client\treq/s\tratio\treceived (hp/plain)\tothers' cores hp/plain\tsteal hp/plain\ttries\t")
	for _, x := range r.replay {
		n := x.hpCount
		fmt.Fprintf(tw, "%d\t%d\t%s\t%.0f\t%.0f\t%s\t%.0f\t%s\t%d/%d\t%.2f/%.2f\t%s%.2f/%.2f\t%d\t\n", x.rep, n, x.hpElapsed.Round(time.Millisecond), x.hpRate,
			perReq(x.hpCPU, n), x.plainElapsed.Round(time.Millisecond), x.plRate, pct(x.ratio()), x.hpCount, x.plainCount,
			x.hpOthers, x.plOthers, r.mark(x.disturbance()), x.hpSteal, x.plSteal, x.tries)
		if x.prefillNon2xx > 0 || x.plainNon2xx > 0 {
			fmt.Fprintf(tw, "\t\tprefill non-2xx %d, plain non-2xx %d\t\t\t\t\t\t\t\n", x.prefillNon2xx, x.plainNon2xx)
		}
	}
	tw.Flush()
}

func (r *report) writeRSS(s io.Writer) {
	x := r.rss
	io.WriteString(s, "\n3. RSS (VmRSS / VmHWM from /proc/PID/status)\n")
	tw := table(s)
	fmt.Fprintln(tw, "state\tVmRSS\tVmHWM (peak so far)\tspool\t")
	fmt.Fprintf(tw, "idle, 3s after start\t%s\t%s\tempty\t\n", mib(x.idleRSS), mib(x.idleHWM))
	fmt.Fprintf(tw, "%d queued (1/s host), 5s after the last 202\t%s\t%s\t%d msgs, %.0f MiB\t\n", x.queued, mib(x.settledRSS), mib(x.peakHWM),
		x.queuedMsgs, float64(x.queuedBytes)/(1<<20))
	fmt.Fprintf(tw, "same spool after a restart, 5s\t%s\t%s\t%d msgs\t\n", mib(x.restartRSS), mib(x.restartHWM), x.restartMsgs)
	tw.Flush()
	fmt.Fprintf(s, "   queueing took %v (%.0f/s, 64 conns); %d not accepted; highest VmRSS sampled every 100ms: %s\n",
		x.fillTime.Round(time.Millisecond), float64(x.queued)/x.fillTime.Seconds(), x.fillRejected, mib(x.sampMax))
	if x.hosts <= 0 {
		return
	}
	tw = table(s)
	fmt.Fprintln(tw, "state\tVmRSS\tVmHWM (peak so far)\tspool\t")
	fmt.Fprintf(tw, "%d queued over %d hosts (1/h each), 5s after the last 202\t%s\t%s\t%d msgs\t\n", x.queued, x.hosts,
		mib(x.manySettled), mib(x.manyPeak), x.manyMsgs)
	fmt.Fprintf(tw, "same spool after a restart, 5s\t%s\t%s\t%d msgs\t\n", mib(x.manyRestartRSS), mib(x.manyRestartHWM), x.manyLeft)
	tw.Flush()
	fmt.Fprintf(s, "   queueing took %v (%.0f/s, 64 conns); %d not accepted; highest VmRSS sampled every 100ms: %s\n",
		x.manyFillTime.Round(time.Millisecond), float64(x.queued)/x.manyFillTime.Seconds(), x.manyRejected, mib(x.manySampMax))
}

func (r *report) writePacing(s io.Writer) {
	io.WriteString(s, "\n4. Pacing: a backlog per host, all resumed at once; arrivals timed at the receiver\n")
	tw := table(s)
	fmt.Fprintln(tw, "rate\tburst\tN\tW\tmax sends in W\tB+R·W\tok\texcess as time\tsteady rate\tof R\toverall rate\t")
	for _, p := range r.pacing {
		for i, w := range p.windows {
			if i == 0 {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%gs\t%d\t%g\t%v\t%s\t%.2f/s\t%s\t%.2f/s\t\n", p.c.rate, p.c.burst, p.got, w.w, w.max, w.bound, w.ok(),
					ms(time.Duration(w.slack*1e9)), p.steadyRate, pct(p.steadyRate/p.c.perS), p.overall)
			} else {
				fmt.Fprintf(tw, "\t\t\t%gs\t%d\t%g\t%v\t%s\t\t\t\t\n", w.w, w.max, w.bound, w.ok(), ms(time.Duration(w.slack*1e9)))
			}
		}
	}
	tw.Flush()
	io.WriteString(s, "   steady rate = (N-1-B) / (t[N-1] - t[B]): the rate after the initial burst; overall = N / (last arrival - resume).\n"+
		"   excess as time = (max - bound) / R: how much arrival-time jitter (sends bunched up on their way to the receiver)\n")
	fmt.Fprintf(s, "   would account for an excess. During the pacing run other processes used %.2f cores and steal was %.2f.\n", r.pacingOthers, r.pacingSteal)
}

// perReq is CPU time in µs per request (or message).
func perReq(cpu time.Duration, n int64) float64 {
	return float64(cpu.Microseconds()) / math.Max(1, float64(n))
}

func cores(c cpuSplit, el time.Duration) string {
	s := el.Seconds()
	if s <= 0 {
		return ""
	}
	return fmt.Sprintf("%.2f/%.2f/%.2f/%.2f/%.2f", c.server.Seconds()/s, c.gen.Seconds()/s, c.others.Seconds()/s, c.rest.Seconds()/s, c.steal.Seconds()/s)
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
