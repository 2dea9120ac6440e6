package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// 5b. The fleet at scale: three replicas on one redis-server,
// H hosts (10,000; -quick 1,000) at 127.0.x.y on one receiver, each host
// paused fleet-wide while 3 webhooks per host are queued spread over the
// replicas, then resumed: from the resume to the last arrival, Redis
// commands per second and per delivery, redis-server's CPU per delivery,
// the replicas' CPU per delivery and RSS, Redis's memory (peak and
// drained, per host), the fleet's view (its sets, one walk of
// /v1/hosts?scope=fleet), the keys left and whether each expires, and
// what an idle fleet of H known hosts costs Redis for 10 s.

const scaleReplicas = 3

// counter is the scale case's receiver, in this process: one listener on
// every address, so that hosts 127.0.x.y:port reach it (the sink listens
// on 127.0.0.1 only). It counts 2xx answers and the last one's time.
type counter struct {
	ln   net.Listener
	srv  *http.Server
	n    atomic.Int64
	last atomic.Int64 // ns
}

func startCounter() (*counter, error) {
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		return nil, err
	}
	c := &counter{ln: ln}
	c.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		c.n.Add(1)
		c.last.Store(time.Now().UnixNano())
	})}
	go c.srv.Serve(ln)
	return c, nil
}

func (c *counter) wait(n int64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for c.n.Load() < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("receiver got %d of %d within %v", c.n.Load(), n, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

type scaleResult struct {
	hosts, n         int
	early            int64         // delivered before the resume (see scaleFill)
	paused           bool          // queued paused, then resumed; else queued while delivering
	resumeTook       time.Duration // resuming every host (the admin API, one replica), or queueing
	elapsed          time.Duration
	received         int64
	cmds, scripts    int64 // during the replay
	redisCPU         time.Duration
	hpCPU            []time.Duration
	hpRSS            []int64 // KiB, after the replay
	memBase, memPeak int64   // used_memory, bytes
	memDrained       int64
	viewBytes        int64 // the view sets' MEMORY USAGE, summed, mid-replay
	viewWalk         time.Duration
	viewHosts        int
	keys, noTTL      int // after the replay, and keys that would never expire
	noTTLKinds       string
	idleCmds         int64 // in 10 s idle after the replay
	idleCPU          time.Duration
	byCmd            map[string]int64 // commands during the replay, by name
}

var reCmdStat = regexp.MustCompile(`(?m)^cmdstat_([a-z|]+):calls=([0-9]+)`)

// cmdStats is INFO commandstats' calls by command.
func cmdStats(ctx context.Context, rdb *redis.Client) map[string]int64 {
	s, _ := rdb.Info(ctx, "commandstats").Result()
	out := map[string]int64{}
	for _, m := range reCmdStat.FindAllStringSubmatch(s, -1) {
		out[m[1]], _ = strconv.ParseInt(m[2], 10, 64)
	}
	return out
}

var reInfo = regexp.MustCompile(`(?m)^(total_commands_processed|used_memory|used_cpu_sys|used_cpu_user):([0-9.]+)\r?$`)

// redisInfo reads the INFO fields scale reports (CPU in µs).
func redisInfo(ctx context.Context, rdb *redis.Client) (map[string]int64, error) {
	s, err := rdb.Info(ctx, "stats", "memory", "cpu").Result()
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, m := range reInfo.FindAllStringSubmatch(s, -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		if strings.HasPrefix(m[1], "used_cpu") {
			v *= 1e6
		}
		out[m[1]] = int64(v)
	}
	return out, nil
}

// fleetScaleSection runs 5b on a redis-server of its own (-only
// fleetscale; it needs redis-server).
func (b *bench) fleetScaleSection() error {
	rds, err := startRedis(b.work)
	if err != nil {
		return err
	}
	defer rds.stop()
	for _, paused := range []bool{false, true} {
		r, err := b.fleetScale(rds, paused)
		if err != nil {
			return err
		}
		b.rep.fleet = append(b.rep.fleet, &fleetRow{what: "scale", scale: r})
		if err := rds.flush(); err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) fleetScale(rds *redisProc, paused bool) (*scaleResult, error) {
	hosts := 10000
	if b.quick {
		hosts = 1000
	}
	recv, err := startCounter()
	if err != nil {
		return nil, err
	}
	defer recv.srv.Close()
	_, port, _ := net.SplitHostPort(recv.ln.Addr().String())
	names := make([]string, hosts)
	for i := range names {
		names[i] = fmt.Sprintf("127.0.%d.%d:%s", i/250, i%250+1, port)
	}
	// Every host in the config: only so many hosts that are not may be
	// paused (admin.DefaultMaxPaused).
	cfg := hpConfig{logLevel: b.logLevel, bigSpool: true,
		extra: fmt.Sprintf("fleet:\n  redis: %q\n  key_prefix: scale\n  timeout: 2s\n", rds.url)}
	for _, h := range names {
		cfg.hosts = append(cfg.hosts, hostCfg{key: h, rate: "100/s", burst: 10, concurrency: 4})
	}
	var hps []*hookpace
	for i := range scaleReplicas {
		hp, err := startHookpace(b.bin, b.work, fmt.Sprintf("fleet-scale-%d", i+1), cfg)
		if err != nil {
			return nil, err
		}
		defer hp.cleanup(b.keep)
		hps = append(hps, hp)
	}
	rdb := redis.NewClient(&redis.Options{Addr: strings.TrimSuffix(strings.TrimPrefix(rds.url, "redis://"), "/0")})
	defer rdb.Close()
	r := &scaleResult{hosts: hosts, n: 3 * hosts, paused: paused}
	if err := b.scaleFill(r, hps, rdb, recv, names); err != nil {
		return nil, err
	}
	if err := b.scaleRun(r, hps, rdb, rds, recv, names); err != nil {
		return nil, err
	}
	return r, b.scaleAfter(r, hps, rdb, rds)
}

// scaleFill pauses every host (at one replica: fleet-wide) and queues 3
// webhooks per host, one at each replica.
func (b *bench) scaleFill(r *scaleResult, hps []*hookpace, rdb *redis.Client, recv *counter, names []string) error {
	ctx := context.Background()
	info, err := redisInfo(ctx, rdb)
	if err != nil {
		return err
	}
	r.memBase = info["used_memory"]
	if !r.paused {
		return nil
	}
	logf("fleet scale: pausing %d hosts", len(names))
	if err := hps[0].hostsDo("pause", names); err != nil {
		return err
	}
	if err := b.scalePost(r, hps, names); err != nil {
		return err
	}
	// A replica that did not hear of the pause yet (Redis slow: it paced
	// alone) may deliver some at once: they are counted out.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var queued int64
		for _, hp := range hps {
			u, _ := hp.spool()
			queued += u.Messages
		}
		if r.early = recv.n.Load(); queued+r.early >= int64(r.n) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("fleet scale: %d queued and %d delivered of %d after 2m", queued, r.early, r.n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.waitQuiet("fleet scale")
	return nil
}

// scalePost queues one webhook per host at each replica.
func (b *bench) scalePost(r *scaleResult, hps []*hookpace, names []string) error {
	logf("fleet scale: queueing %d webhooks over %d hosts and %d replicas", r.n, len(names), len(hps))
	var wg sync.WaitGroup
	var bad atomic.Int64
	for _, hp := range hps {
		wg.Go(func() {
			targets := make([]string, len(names))
			for i, h := range names {
				targets[i] = "http://" + h + "/hook"
			}
			n, _ := postSpread(hp.proxy, targets, b.body, len(names), 32)
			bad.Add(n)
		})
	}
	wg.Wait()
	if bad.Load() > 0 {
		return fmt.Errorf("fleet scale: %d webhooks not accepted", bad.Load())
	}
	return nil
}

// scaleRun resumes every host (or, not paused, queues the webhooks) and
// measures until the last arrival.
func (b *bench) scaleRun(r *scaleResult, hps []*hookpace, rdb *redis.Client, rds *redisProc, recv *counter, names []string) error {
	ctx := context.Background()
	before, err := redisInfo(ctx, rdb)
	if err != nil {
		return err
	}
	s0, err := rds.scriptCalls()
	if err != nil {
		return err
	}
	by0 := cmdStats(ctx, rdb)
	c0 := make([]time.Duration, len(hps))
	for i, hp := range hps {
		c0[i] = cpuTime(hp.pid())
	}
	stop := make(chan struct{})
	var peak atomic.Int64
	var sampled sync.WaitGroup
	sampled.Go(func() { samplePeak(rdb, &peak, stop) })
	t0 := time.Now()
	start := func() error { return hps[0].hostsDo("resume", names) }
	if !r.paused {
		start = func() error { return b.scalePost(r, hps, names) }
	}
	if err := start(); err != nil {
		return err
	}
	r.resumeTook = time.Since(t0)
	r.viewBytes, r.viewHosts, r.viewWalk = viewCost(rdb, hps[1])
	if err := recv.wait(int64(r.n), 10*time.Minute); err != nil {
		return err
	}
	close(stop)
	sampled.Wait()
	r.elapsed, r.received = time.Duration(recv.last.Load()-t0.UnixNano()), recv.n.Load()-r.early
	after, err := redisInfo(ctx, rdb)
	if err != nil {
		return err
	}
	s1, err := rds.scriptCalls()
	if err != nil {
		return err
	}
	r.cmds, r.scripts = after["total_commands_processed"]-before["total_commands_processed"], s1-s0
	r.byCmd = cmdStats(ctx, rdb)
	for k, v := range by0 {
		r.byCmd[k] -= v
	}
	r.redisCPU = time.Duration(after["used_cpu_sys"]+after["used_cpu_user"]-before["used_cpu_sys"]-before["used_cpu_user"]) * time.Microsecond
	r.memPeak = max(peak.Load(), after["used_memory"])
	for i, hp := range hps {
		r.hpCPU = append(r.hpCPU, cpuTime(hp.pid())-c0[i])
		rss, _, _ := memKiB(hp.pid())
		r.hpRSS = append(r.hpRSS, rss)
	}
	return nil
}

// samplePeak keeps the most used_memory seen every 100 ms until stop.
func samplePeak(rdb *redis.Client, peak *atomic.Int64, stop chan struct{}) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if info, err := redisInfo(context.Background(), rdb); err == nil && info["used_memory"] > peak.Load() {
			peak.Store(info["used_memory"])
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// viewCost is the view sets' memory and one walk of the fleet's view at
// hp, a page of 1,000 at a time.
func viewCost(rdb *redis.Client, hp *hookpace) (bytes int64, hosts int, took time.Duration) {
	ctx := context.Background()
	keys, _ := rdb.Keys(ctx, "{scale}:view:*").Result()
	for _, k := range keys {
		n, _ := rdb.MemoryUsage(ctx, k).Result()
		bytes += n
	}
	t0 := time.Now()
	cursor := ""
	for range 1000 {
		var page struct {
			Hosts      []struct{ Host string }
			NextCursor string `json:"next_cursor"`
		}
		if err := getJSON("http://"+hp.admin+"/v1/hosts?scope=fleet&limit=1000&cursor="+cursor, &page); err != nil {
			logf("fleet scale: view: %v", err)
			break
		}
		hosts += len(page.Hosts)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	return bytes, hosts, time.Since(t0)
}

// scaleAfter reads the keys left once drained (each must expire) and what
// 10 s of an idle fleet costs Redis.
func (b *bench) scaleAfter(r *scaleResult, hps []*hookpace, rdb *redis.Client, rds *redisProc) error {
	ctx := context.Background()
	kinds := map[string]int{}
	iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return err
	}
	r.keys = len(keys)
	for i := 0; i < len(keys); i += 1000 {
		part := keys[i:min(i+1000, len(keys))]
		cmds := make([]*redis.DurationCmd, len(part))
		rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for j, k := range part {
				cmds[j] = p.PTTL(ctx, k)
			}
			return nil
		})
		for j, c := range cmds {
			if c.Val() < 0 && c.Val() != -2*time.Nanosecond { // -1: no TTL; -2: gone meanwhile
				r.noTTL++
				kinds[part[j][strings.LastIndexByte(part[j], ':')+1:]]++
			}
		}
	}
	for k, n := range kinds {
		r.noTTLKinds += fmt.Sprintf(" %s=%d", k, n)
	}
	info, err := redisInfo(ctx, rdb)
	if err != nil {
		return err
	}
	r.memDrained = info["used_memory"]
	logf("fleet scale: 10 s idle")
	time.Sleep(10 * time.Second)
	idle, err := redisInfo(ctx, rdb)
	if err != nil {
		return err
	}
	r.idleCmds = idle["total_commands_processed"] - info["total_commands_processed"]
	r.idleCPU = time.Duration(idle["used_cpu_sys"]+idle["used_cpu_user"]-info["used_cpu_sys"]-info["used_cpu_user"]) * time.Microsecond
	return nil
}

// flush empties redis-server between the scale runs.
func (r *redisProc) flush() error {
	rdb := redis.NewClient(&redis.Options{Addr: strings.TrimSuffix(strings.TrimPrefix(r.url, "redis://"), "/0")})
	defer rdb.Close()
	if err := rdb.FlushAll(context.Background()).Err(); err != nil {
		return err
	}
	return rdb.ConfigResetStat(context.Background()).Err()
}
