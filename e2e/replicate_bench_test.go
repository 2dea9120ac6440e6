package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/natstest"
)

// BenchmarkReplicationIngest measures what replicating the spool to a
// JetStream stream (three nats-servers on loopback, R3) costs at ingest,
// on the real binary: hookpace's CPU per webhook accepted by 16 parallel
// senders, and a lone sender's latency (one request at a time), with and
// without replication, in alternating pairs. The partner is paused, so
// that only ingest runs. go test ./e2e -run '^$' -bench BenchmarkReplicationIngest -benchtime 1x
//
// With HOOKPACE_BENCH_BINARIES=name=path,name=path (binaries built side by
// side, e.g. before and after a change), the arms are those binaries
// instead, each replicating but one named local, and each arm's numbers
// are also given as ratios to every arm before it.
func BenchmarkReplicationIngest(b *testing.B) {
	nats := natstest.Start(b, 3)
	rc := httpSink(b)
	const cfg = `egress: {allow: ["127.0.0.0/8"]}`
	replicate := fmt.Sprintf(`  replicate:
    nats: {urls: ["%s"], replicas: 3}`, strings.Join(nats.URLs(), `", "`))
	type arm struct {
		name     string
		hp       *benchHookpace
		cpu      []float64 // µs per webhook, hookpace
		natsCPU  []float64 // µs per webhook, the three nats-servers
		p50, p99 []float64 // ms, lone sender
	}
	var arms []*arm
	if bins := os.Getenv("HOOKPACE_BENCH_BINARIES"); bins != "" {
		for _, nb := range strings.Split(bins, ",") {
			name, bin, ok := strings.Cut(nb, "=")
			if !ok {
				b.Fatalf("HOOKPACE_BENCH_BINARIES: %q is not name=path", nb)
			}
			repl := replicate
			if name == "local" {
				repl = ""
			}
			arms = append(arms, &arm{name: name, hp: startBenchOf(b, bin, cfg, repl)})
		}
	} else {
		arms = []*arm{{name: "local", hp: startBench(b, cfg, "")}, {name: "R3", hp: startBench(b, cfg, replicate)}}
	}
	for _, a := range arms {
		a.hp.pause(b, rc)
	}
	const pairs, burst, lone = 3, 4000, 400
	for p := range pairs {
		for _, a := range arms {
			natsBefore := natsCPU(nats)
			before := procCPU(a.hp.cmd.Process.Pid)
			postParallel(b, a.hp, burst, 16, fmt.Sprintf("http://%s/p%d/%s/", rc, p, a.name))
			a.cpu = append(a.cpu, float64((procCPU(a.hp.cmd.Process.Pid)-before).Microseconds())/burst)
			a.natsCPU = append(a.natsCPU, float64((natsCPU(nats)-natsBefore).Microseconds())/burst)
			lat := loneSender(b, a.hp, lone, fmt.Sprintf("http://%s/lone%d/%s/", rc, p, a.name))
			a.p50 = append(a.p50, ms(lat[len(lat)/2]))
			a.p99 = append(a.p99, ms(lat[len(lat)*99/100]))
		}
	}
	for _, a := range arms {
		b.Logf("%-5s hookpace CPU µs/webhook %v; nats-servers %v; lone sender p50 ms %v, p99 ms %v",
			a.name, round(a.cpu), round(a.natsCPU), round(a.p50), round(a.p99))
		b.ReportMetric(median(a.cpu), a.name+"-cpu-µs/webhook")
		b.ReportMetric(median(a.p50), a.name+"-lone-p50-ms")
		b.ReportMetric(median(a.p99), a.name+"-lone-p99-ms")
	}
	for i, a := range arms {
		for _, o := range arms[:i] {
			b.Logf("%s/%s: CPU per webhook %.3f, lone p50 %.3f, p99 %.3f (medians of the pairs' ratios)",
				a.name, o.name, medianRatio(a.cpu, o.cpu), medianRatio(a.p50, o.p50), medianRatio(a.p99, o.p99))
		}
	}
	b.ReportMetric(median(arms[len(arms)-1].natsCPU), arms[len(arms)-1].name+"-nats-cpu-µs/webhook")
}

// medianRatio is the median of xs[i]/ys[i], the pairs' ratios.
func medianRatio(xs, ys []float64) float64 {
	r := make([]float64, len(xs))
	for i := range xs {
		r[i] = xs[i] / ys[i]
	}
	return median(r)
}

// benchHookpace is the real binary for a benchmark (the harness's
// Hookpace reports to a *testing.T).
type benchHookpace struct {
	cmd          *exec.Cmd
	proxy, admin string
}

// startBench starts hookpace on cfg, which says nothing of listen, admin
// or spool.dir; replicate is its spool.replicate block, or "".
func startBench(b *testing.B, cfg, replicate string) *benchHookpace {
	b.Helper()
	return startBenchOf(b, binary, cfg, replicate)
}

// startBenchOf is startBench with the hookpace binary bin.
func startBenchOf(b *testing.B, bin, cfg, replicate string) *benchHookpace {
	b.Helper()
	dir := b.TempDir()
	doc := fmt.Sprintf("listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nspool:\n  dir: %s\n%s\n%s\n", filepath.Join(dir, "spool"), replicate, cfg)
	path := filepath.Join(dir, "hookpace.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		b.Fatal(err)
	}
	h := &benchHookpace{cmd: exec.Command(bin, "run", "--config", path)}
	out, err := h.cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	h.cmd.Stderr = h.cmd.Stdout
	if err := h.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.cmd.Process.Kill(); h.cmd.Wait() })
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); strings.Contains(line, "hookpace started") {
			addrs := startedAddrs(line)
			h.proxy, h.admin = addrs[0], addrs[1]
			go io.Copy(io.Discard, out)
			return h
		}
	}
	b.Fatalf("hookpace exited at start (%s)", doc)
	return nil
}

func (h *benchHookpace) client() *http.Client {
	u, _ := url.Parse("http://" + h.proxy)
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u), MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}
}

func (h *benchHookpace) pause(b *testing.B, host string) {
	if out, err := exec.Command(binary, "pause", host, "--admin", h.admin).CombinedOutput(); err != nil {
		b.Fatalf("pause: %v\n%s", err, out)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func round(xs []float64) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = strconv.FormatFloat(x, 'f', 2, 64)
	}
	return out
}

// httpSink is the partner's address: it is paused while the benchmark
// runs, so nothing is ever sent there.
func httpSink(*testing.B) string { return "127.0.0.1:9" }

func procCPU(pid int) time.Duration {
	buf, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(buf)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

func natsCPU(c *natstest.Cluster) time.Duration {
	var d time.Duration
	for _, s := range c.Servers {
		d += procCPU(s.Pid())
	}
	return d
}

func postParallel(b *testing.B, hp *benchHookpace, n, parallel int, prefix string) {
	c := hp.client()
	defer c.CloseIdleConnections()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var fails int
	sem := make(chan struct{}, parallel)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			resp, err := c.Post(prefix+strconv.Itoa(i), "application/json", bytes.NewReader(WebhookBody(i)))
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			if err != nil || resp.StatusCode != http.StatusAccepted {
				mu.Lock()
				fails++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if fails > 0 {
		b.Fatalf("%d of %d webhooks not accepted", fails, n)
	}
}

func loneSender(b *testing.B, hp *benchHookpace, n int, prefix string) []time.Duration {
	c := hp.client()
	defer c.CloseIdleConnections()
	lat := make([]time.Duration, 0, n)
	for i := range n {
		start := time.Now()
		resp, err := c.Post(prefix+strconv.Itoa(i), "application/json", bytes.NewReader(WebhookBody(i)))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			b.Fatalf("lone webhook %d: %d", i, resp.StatusCode)
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	return lat
}
