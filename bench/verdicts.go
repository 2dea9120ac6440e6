package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// target is one of the performance targets, what was measured
// against it, and the verdict ("" for a row given for reference).
type target struct{ name, measured, verdict string }

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT MET"
}

// targets judges what the report holds against the targets.
func (r *report) targets() []target {
	var ts []target
	if len(r.ingest) > 0 {
		ts = append(ts, r.ingestTargets()...)
	}
	if len(r.half) > 0 {
		ts = append(ts, r.halfTarget())
	}
	if len(r.floor) > 0 {
		ts = append(ts, r.floorTarget())
	}
	if len(r.replay) > 0 {
		ts = append(ts, r.replayTarget())
	}
	if r.rss != nil {
		ts = append(ts, r.rssTargets()...)
	}
	if len(r.pacing) > 0 {
		ts = append(ts, r.pacingTargets()...)
	}
	if len(r.sender) > 0 {
		ts = append(ts, r.senderTarget())
	}
	return ts
}

// undisturbed picks the clean values when there are any (and says how
// many of all), else all of them.
func undisturbed(all, clean []float64) ([]float64, string) {
	if len(clean) > 0 {
		return clean, fmt.Sprintf("%d undisturbed of %d reps", len(clean), len(all))
	}
	return all, "ALL reps disturbed"
}

func (r *report) ingestTargets() []target {
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
			if row.dist <= r.disturbed && noopDist[row.gen+strconv.Itoa(row.rep)] <= r.disturbed {
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
	xs, note := undisturbed(byGen[gen], clean[gen])
	m := mean(xs)
	ts := []target{{"ingest req/s >= 40% of no-op (" + gen + ", mean of reps)",
		fmt.Sprintf("%s (all reps: %s; %s)", pct(m), joinPct(byGen[gen]), note), verdict(m >= 0.40)}}
	for _, g2 := range []string{"go", "gohttp"} {
		if gen != g2 && len(byGen[g2]) > 0 {
			xs, note := undisturbed(byGen[g2], clean[g2])
			ts = append(ts, target{"  same with generator " + g2 + " (for reference)",
				fmt.Sprintf("%s (all reps: %s; %s)", pct(mean(xs)), joinPct(byGen[g2]), note), ""})
		}
	}
	return append(ts, target{"ingest: no non-2xx (all hookpace runs)", fmt.Sprintf("%d", bad), verdict(bad == 0)})
}

func (r *report) halfTarget() target {
	var p99s, cleanP99 []float64
	for _, h := range r.half {
		if h.target == "hookpace" {
			p99s = append(p99s, float64(h.res.p99)/1e6)
			if h.dist <= r.disturbed {
				cleanP99 = append(cleanP99, float64(h.res.p99)/1e6)
			}
		}
	}
	xs, note := undisturbed(p99s, cleanP99)
	m := mean(xs)
	return target{"p99 at half load <= 10 ms (mean of reps)",
		fmt.Sprintf("%.2f ms (all reps: %s; %s)", m, joinMs(p99s), note), verdict(m <= 10)}
}

func (x *replayRow) ratio() float64 { return x.hpRate / x.plRate }

// disturbance is the worse of the two runs' other processes plus steal.
func (x *replayRow) disturbance() float64 { return max(x.hpOthers+x.hpSteal, x.plOthers+x.plSteal) }

func (r *report) replayTarget() target {
	var ratios, cleanR []float64
	for _, x := range r.replay {
		ratios = append(ratios, x.ratio())
		if x.disturbance() <= r.disturbed {
			cleanR = append(cleanR, x.ratio())
		}
	}
	xs, note := undisturbed(ratios, cleanR)
	m := mean(xs)
	return target{"replay >= 50% of a plain Go client (mean of reps)",
		fmt.Sprintf("%s (all reps: %s; %s)", pct(m), joinPct(ratios), note), verdict(m >= 0.50)}
}

func (r *report) rssTargets() []target {
	x := r.rss
	queued := target{fmt.Sprintf("RSS <= 150 MiB with %d queued (peak VmHWM)", x.queued),
		fmt.Sprintf("%s peak, %s settled", mib(x.peakHWM), mib(x.settledRSS)), verdict(x.peakHWM <= 150*1024 && x.queued >= 200000)}
	if x.queued < 200000 {
		queued.verdict = "n/a (fewer than 200,000 queued)"
	}
	ts := []target{
		{"RSS idle <= 40 MiB", mib(x.idleRSS) + " (VmHWM " + mib(x.idleHWM) + ")", verdict(x.idleRSS <= 40*1024)},
		queued,
	}
	if x.hosts > 0 {
		many := target{fmt.Sprintf("RSS <= 150 MiB with %d queued over %d hosts (peak VmHWM)", x.queued, x.hosts),
			fmt.Sprintf("%s peak, %s settled", mib(x.manyPeak), mib(x.manySettled)), verdict(x.manyPeak <= 150*1024)}
		if x.queued < 200000 || x.hosts < 5000 {
			many.verdict = "n/a (fewer than 200,000 over 5,000 hosts)"
		}
		ts = append(ts, many)
	}
	return ts
}

func (w windowCheck) ok() bool { return float64(w.max) <= w.bound }

func (r *report) pacingTargets() []target {
	okAll, rateOK := true, true
	worst := math.Inf(1)
	for _, p := range r.pacing {
		for _, w := range p.windows {
			okAll = okAll && w.ok()
		}
		f := p.steadyRate / p.c.perS
		worst = math.Min(worst, f)
		rateOK = rateOK && f >= 0.98
	}
	return []target{
		{"pacing: no window W has more than B + R·W sends", verdict(okAll), verdict(okAll)},
		{"pacing: achieved >= 98% of R", "worst " + pct(worst), verdict(rateOK)},
	}
}

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
