package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/hookpace/hookpace/internal/redistest"
)

// 5. Fleet: replay throughput with fleet mode on a local
// redis-server against local pacing, in the same run, to one fast host and
// to 1,000 hosts, and the Redis round trips per delivery. Not in the
// default sections (it needs redis-server): -only fleet.

type fleetRow struct {
	rep      int
	what     string // "1 host" or "1000 hosts"
	mode     string // "local" or "fleet"
	n        int
	elapsed  time.Duration
	rate     float64
	cpu      time.Duration
	trips    float64 // Redis round trips during the replay
	redisCPU time.Duration
	scripts  float64 // script calls (EVALSHA and EVAL) redis-server ran during the replay
	others   float64
	steal    float64
	received int64
	scale    *scaleResult // the scale case (fleetscale.go) instead of the above
}

func (b *bench) fleet() error {
	rds, err := startRedis(b.work)
	if err != nil {
		return err
	}
	defer rds.stop()
	bin := b.bin
	var env []string
	if b.fleetProf != "" {
		bin = filepath.Join(b.work, "hookpace-pprof")
		logf("fleet: building ./bench/pprofwrap for -fleet-profile")
		if err := goBuild(b.root, bin, "./bench/pprofwrap"); err != nil {
			return err
		}
		if err := os.MkdirAll(b.fleetProf, 0o755); err != nil {
			return err
		}
	}
	cases := []struct {
		what  string
		hosts int
	}{{"1 host", 1}, {"1000 hosts", 1000}}
	for rep := 1; rep <= b.reps; rep++ {
		for _, c := range cases {
			modes := []string{"local", "fleet"}
			if rep%2 == 0 {
				modes = []string{"fleet", "local"}
			}
			for _, mode := range modes {
				if b.fleetProf != "" {
					pp, err := freePort()
					if err != nil {
						return err
					}
					env = []string{"HOOKPACE_PPROF=" + pp}
				}
				row, err := b.fleetOnce(rep, c.what, c.hosts, mode, rds, bin, env)
				if err != nil {
					return err
				}
				b.rep.fleet = append(b.rep.fleet, row)
			}
		}
	}
	return nil
}

func (b *bench) fleetOnce(rep int, what string, nHosts int, mode string, rds *redisProc, bin string, env []string) (*fleetRow, error) {
	sink, err := startSink(nHosts, http.StatusOK, "last")
	if err != nil {
		return nil, err
	}
	defer sink.stop()
	cfg := hpConfig{logLevel: b.logLevel, bigSpool: true, extraEnv: env}
	if nHosts == 1 {
		cfg.hosts = []hostCfg{{key: sink.addrs[0], rate: "1000000/s", burst: 1000, concurrency: b.c}}
	} else {
		cfg.defaultRate = "1000000/s"
	}
	if mode == "fleet" {
		cfg.extra = fmt.Sprintf("fleet:\n  redis: %q\n  key_prefix: bench%d%s\n", rds.url, rep, strings.ReplaceAll(what, " ", ""))
	}
	hp, err := startHookpace(bin, b.work, "fleet-"+mode, cfg)
	if err != nil {
		return nil, err
	}
	defer hp.cleanup(b.keep)
	if err := hp.hostsDo("pause", sink.addrs); err != nil {
		return nil, err
	}
	n := b.n
	if nHosts > 1 {
		n = nHosts * max(b.n/nHosts, 5)
	}
	logf("fleet rep %d, %s, %s: prefilling %d webhooks (paused)", rep, what, mode, n)
	if bad, err := postSpreadN(hp.proxy, sink.addrs, b.body, n, 64); bad > 0 {
		return nil, fmt.Errorf("prefill: %d not accepted (%v)", bad, err)
	}
	if err := hp.waitQueued(int64(n), time.Minute); err != nil {
		return nil, err
	}
	b.waitQuiet("fleet")
	row := &fleetRow{rep: rep, what: what, mode: mode, n: n}
	trips0, err := hp.fleetTrips()
	if err != nil {
		return nil, err
	}
	prof := ""
	if len(env) > 0 {
		prof = filepath.Join(b.fleetProf, fmt.Sprintf("rep%d-%s-%s.pprof", rep, strings.ReplaceAll(what, " ", ""), mode))
		if err := pprofCtl(env, "start?file="+url.QueryEscape(prof)); err != nil {
			return nil, err
		}
	}
	s0, err := rds.scriptCalls()
	if err != nil {
		return nil, err
	}
	c0, r0 := cpuTime(hp.pid()), cpuTime(rds.Pid())
	dist := startDisturbance()
	t0 := time.Now()
	if err := hp.hostsDo("resume", sink.addrs); err != nil {
		return nil, err
	}
	if err := hp.waitDrained(10 * time.Minute); err != nil {
		return nil, err
	}
	var last int64
	for _, a := range sink.addrs {
		st, err := sinkStatsOf(a)
		if err != nil {
			return nil, err
		}
		last, row.received = max(last, st.LastNS), row.received+st.Count
	}
	row.cpu, row.redisCPU = cpuTime(hp.pid())-c0, cpuTime(rds.Pid())-r0
	s1, err := rds.scriptCalls()
	if err != nil {
		return nil, err
	}
	row.scripts = float64(s1 - s0)
	if prof != "" {
		if err := pprofCtl(env, "stop"); err != nil {
			return nil, err
		}
		logf("fleet: CPU profile of the replay in %s", prof)
	}
	row.elapsed = time.Duration(last - t0.UnixNano())
	row.others, row.steal = dist.stop()
	row.rate = float64(n) / row.elapsed.Seconds()
	trips1, err := hp.fleetTrips()
	row.trips = trips1 - trips0
	return row, err
}

// pprofCtl starts or stops pprofwrap's CPU profile.
func pprofCtl(env []string, op string) error {
	addr := strings.TrimPrefix(env[0], "HOOKPACE_PPROF=")
	resp, err := ctl.Get("http://" + addr + "/debug/cpuprofile/" + op)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("cpuprofile %s: %s", op, resp.Status)
	}
	return nil
}

// waitDrained waits until the spool is empty: every webhook delivered.
func (h *hookpace) waitDrained(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		u, err := h.spool()
		if err == nil && u.Messages == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("spool still holds %d messages after %v (err %v)", u.Messages, limit, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// hostsDo pauses or resumes every host through the admin API, 16 at a time.
func (h *hookpace) hostsDo(op string, hosts []string) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	sem := make(chan struct{}, 16)
	for _, host := range hosts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			resp, err := ctl.Post("http://"+h.admin+"/v1/hosts/"+url.PathEscape(host)+"/"+op, "application/json", strings.NewReader("{}"))
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != 200 {
					err = fmt.Errorf("%s %s: %s", op, host, resp.Status)
				}
			}
			if err != nil {
				mu.Lock()
				first = cmpOr(first, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// postSpreadN posts n webhooks round-robin over the hosts.
func postSpreadN(proxy string, hosts []string, body []byte, n, conns int) (int64, error) {
	per := n / len(hosts)
	var bad int64
	var first error
	for _, h := range hosts {
		x, err := postN(proxy, "http://"+h+"/hook", body, per, min(conns, per))
		bad += x
		first = cmpOr(first, err)
	}
	return bad, first
}

var reTrips = regexp.MustCompile(`(?m)^hookpace_fleet_round_trips_total\{[^}]*\} ([0-9.e+]+)$`)

// fleetTrips sums hookpace_fleet_round_trips_total (0 without a fleet).
func (h *hookpace) fleetTrips() (float64, error) {
	resp, err := ctl.Get("http://" + h.admin + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var sb strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "hookpace_fleet_round_trips_total{") {
			sb.WriteString(sc.Text() + "\n")
		}
	}
	sum := 0.0
	for _, m := range reTrips.FindAllStringSubmatch(sb.String(), -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		sum += v
	}
	return sum, sc.Err()
}

// redisProc is the fleet sections' redis-server, run by the tests'
// helper (internal/redistest): on a free loopback port, persistence off.
type redisProc struct {
	*redistest.Server
	url string
}

// startRedis runs redis-server, its files in dir.
func startRedis(dir string) (*redisProc, error) {
	s, err := redistest.Launch(dir)
	if err != nil {
		return nil, fmt.Errorf("the fleet section needs redis-server: %w", err)
	}
	return &redisProc{Server: s, url: s.URL()}, nil
}

var reScriptCalls = regexp.MustCompile(`(?m)^cmdstat_eval(?:sha)?:calls=([0-9]+)`)

// scriptCalls is how many EVALSHA and EVAL calls redis-server has run
// (INFO commandstats), over a connection of its own.
func (r *redisProc) scriptCalls() (int64, error) {
	c, err := net.DialTimeout("tcp", strings.TrimSuffix(strings.TrimPrefix(r.url, "redis://"), "/0"), 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("INFO commandstats\r\n")); err != nil {
		return 0, err
	}
	rd := bufio.NewReader(c)
	head, err := rd.ReadString('\n') // $<length>
	if err != nil || !strings.HasPrefix(head, "$") {
		return 0, fmt.Errorf("INFO commandstats: %q %v", head, err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(head[1:]))
	body := make([]byte, n)
	if _, err := io.ReadFull(rd, body); err != nil {
		return 0, err
	}
	var sum int64
	for _, m := range reScriptCalls.FindAllStringSubmatch(string(body), -1) {
		v, _ := strconv.ParseInt(m[1], 10, 64)
		sum += v
	}
	return sum, nil
}

func (r *redisProc) stop() { r.Kill() }

func (r *report) writeFleet(s *strings.Builder) {
	var rows []*fleetRow
	var scale []*scaleResult
	for _, x := range r.fleet {
		if x.scale != nil {
			scale = append(scale, x.scale)
		} else {
			rows = append(rows, x)
		}
	}
	defer func() {
		for _, x := range scale {
			r.writeFleetScale(s, x)
		}
	}()
	if len(rows) == 0 {
		return
	}
	s.WriteString("\n5. Fleet: replay of N queued 1 KiB webhooks, fleet mode on a local redis-server against local pacing,\n" +
		"   same run, alternating; one host at 1000000/s burst 1000 concurrency C, or 1000 hosts at the defaults' burst and\n" +
		"   concurrency with rate 1000000/s; from the resume to the last arrival; redis trips: hookpace_fleet_round_trips_total\n" +
		"   (a pipelined round trip may carry the asks of many hosts), scripts: EVALSHA/EVAL calls redis-server ran\n")
	tw := tabwriter.NewWriter(s, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  rep\tcase\tmode\tN\telapsed\treq/s\tCPU µs/msg\tredis µs/msg\tredis trips\ttrips/delivery\tscripts/delivery\treceived\tothers' cores\tsteal")
	for _, x := range rows {
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%d\t%v\t%.0f\t%.0f\t%.0f\t%.0f\t%.2f\t%.2f\t%d\t%.2f\t%.2f\n", x.rep, x.what, x.mode, x.n,
			x.elapsed.Round(time.Millisecond), x.rate, float64(x.cpu.Microseconds())/float64(x.n),
			float64(x.redisCPU.Microseconds())/float64(x.n), x.trips,
			x.trips/float64(x.n), x.scripts/float64(x.n), x.received, x.others, x.steal)
	}
	tw.Flush()
	for _, what := range []string{"1 host", "1000 hosts"} {
		var loc, fl, trips, scripts float64
		var n int
		for _, x := range rows {
			if x.what != what {
				continue
			}
			if x.mode == "local" {
				loc += x.rate
			} else {
				fl += x.rate
				trips += x.trips
				scripts += x.scripts
				n += x.n
			}
		}
		if loc > 0 && n > 0 {
			fmt.Fprintf(s, "  %s: fleet mode at %.1f%% of local pacing's deliveries per second (goal >= 70%%), %.2f Redis round trips per delivery (goal <= 1; %.2f script calls)\n",
				what, 100*fl/loc, trips/float64(n), scripts/float64(n))
		}
	}
}
