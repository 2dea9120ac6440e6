package main

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// writeFleetScale prints section 5b (fleetscale.go).
func (r *report) writeFleetScale(s *strings.Builder, x *scaleResult) {
	n := float64(x.received)
	if x.paused {
		fmt.Fprintf(s, "\n5b. Fleet at scale, paused: %d replicas on one redis-server, %d hosts paused fleet-wide while 3 webhooks per host\n"+
			"   were queued (one per replica), then resumed at one replica (took %v); from the resume to the last arrival\n",
			scaleReplicas, x.hosts, x.resumeTook.Round(time.Millisecond))
	} else {
		fmt.Fprintf(s, "\n5b. Fleet at scale: %d replicas on one redis-server, %d hosts at 100/s, burst 10, concurrency 4; 3 webhooks per\n"+
			"   host queued (one per replica, took %v) while delivering; from the first post to the last arrival (the replicas'\n"+
			"   CPU includes the ingest)\n", scaleReplicas, x.hosts, x.resumeTook.Round(time.Millisecond))
	}
	tw := tabwriter.NewWriter(s, 0, 0, 2, ' ', 0)
	var hpCPU time.Duration
	rss := make([]string, len(x.hpRSS))
	for i := range x.hpCPU {
		hpCPU += x.hpCPU[i]
		rss[i] = strconv.FormatInt(x.hpRSS[i]/1024, 10)
	}
	fmt.Fprintf(tw, "  delivered\t%d of %d in %v (%.0f/s; %d delivered before the resume by a replica that paced alone)\n",
		x.received, x.n, x.elapsed.Round(time.Millisecond), n/x.elapsed.Seconds(), x.early)
	fmt.Fprintf(tw, "  redis commands\t%d: %.0f/s, %.2f per delivery (scripts %.2f per delivery)\n", x.cmds,
		float64(x.cmds)/x.elapsed.Seconds(), float64(x.cmds)/n, float64(x.scripts)/n)
	fmt.Fprintf(tw, "  by command\t%s\n", topCmds(x.byCmd, n))
	fmt.Fprintf(tw, "  redis CPU\t%v: %.1f µs per delivery, %.0f%% of a core\n", x.redisCPU.Round(time.Millisecond),
		float64(x.redisCPU.Microseconds())/n, 100*x.redisCPU.Seconds()/x.elapsed.Seconds())
	fmt.Fprintf(tw, "  replicas' CPU\t%v: %.0f µs per delivery; RSS after %s MiB\n", hpCPU.Round(time.Millisecond),
		float64(hpCPU.Microseconds())/n, strings.Join(rss, ", "))
	fmt.Fprintf(tw, "  redis memory\tbase %.1f MiB, peak %.1f MiB (%.0f B per host), drained %.1f MiB (%.0f B per host)\n",
		mibOf(x.memBase), mibOf(x.memPeak), float64(x.memPeak-x.memBase)/float64(x.hosts),
		mibOf(x.memDrained), float64(x.memDrained-x.memBase)/float64(x.hosts))
	fmt.Fprintf(tw, "  fleet view\tsets %.1f MiB at the resume (%.0f B per host and replica); one walk of %d hosts in pages of 1,000: %v\n",
		mibOf(x.viewBytes), float64(x.viewBytes)/float64(x.hosts*scaleReplicas), x.viewHosts, x.viewWalk.Round(time.Millisecond))
	fmt.Fprintf(tw, "  keys after\t%d, %d without a TTL%s\n", x.keys, x.noTTL, x.noTTLKinds)
	fmt.Fprintf(tw, "  idle 10 s\t%d commands (%.0f/s), redis CPU %v\n", x.idleCmds, float64(x.idleCmds)/10, x.idleCPU.Round(time.Millisecond))
	tw.Flush()
}

func mibOf(b int64) float64 { return float64(b) / (1 << 20) }

// topCmds is the commands with the most calls, per delivery.
func topCmds(by map[string]int64, n float64) string {
	type kv struct {
		k string
		v int64
	}
	var all []kv
	for k, v := range by {
		if v > 0 {
			all = append(all, kv{k, v})
		}
	}
	slices.SortFunc(all, func(a, b kv) int { return cmp.Compare(b.v, a.v) })
	var parts []string
	for _, x := range all[:min(len(all), 8)] {
		parts = append(parts, fmt.Sprintf("%s %.2f", x.k, float64(x.v)/n))
	}
	return strings.Join(parts, ", ") + " per delivery"
}
