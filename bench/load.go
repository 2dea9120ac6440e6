package main

// Load generators. Every generator sends the very same bytes to hookpace and
// to the no-op baseline: an absolute-form "POST http://RECEIVER/hook" request
// line, as an HTTP client configured with HTTP_PROXY sends it. For the
// baseline the no-op server simply stands where the proxy would; Go's
// net/http server accepts absolute-form request targets.

import (
	"bufio"
	"bytes"
	"encoding/json"
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
	"sync/atomic"
	"time"
)

// loadResult is one load run as seen by the client.
type loadResult struct {
	Gen      string
	Requests int64           // completed requests (any status)
	Non2xx   int64           // completed with a status outside 200..299
	SockErr  int64           // transport errors, timeouts
	Elapsed  time.Duration   // measured window
	Rate     float64         // offered rate for open-loop runs, else 0
	GenCPU   time.Duration   // CPU of an external generator process (wrk)
	secMax   []time.Duration // open loop: worst latency in each second of the run
	lat      []time.Duration
	// wrk reports percentiles itself.
	p50, p99, p999, max time.Duration
}

func (r *loadResult) RPS() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

func (r *loadResult) finish() {
	if len(r.lat) == 0 {
		return
	}
	slices.Sort(r.lat)
	pct := func(p float64) time.Duration {
		i := int(p/100*float64(len(r.lat)) + 0.5)
		return r.lat[min(max(i-1, 0), len(r.lat)-1)]
	}
	r.p50, r.p99, r.p999, r.max = pct(50), pct(99), pct(99.9), r.lat[len(r.lat)-1]
	r.lat = nil
}

// newClient returns a keep-alive client for up to conns connections. With a
// proxy address it sends every request through that proxy (absolute form),
// loopback targets included.
func newClient(proxy string, conns int) *http.Client {
	tr := &http.Transport{
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		MaxConnsPerHost:     conns,
		DisableCompression:  true,
		IdleConnTimeout:     90 * time.Second,
	}
	if proxy != "" {
		u := &url.URL{Scheme: "http", Host: proxy}
		tr.Proxy = http.ProxyURL(u)
	}
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}
}

func post(c *http.Client, target string, body []byte) (int, error) {
	req, err := http.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// closedLoop runs conns workers, each sending back to back over its own
// keep-alive connection, for dur.
func closedLoop(proxy, target string, body []byte, conns int, dur time.Duration) *loadResult {
	c := newClient(proxy, conns)
	defer c.CloseIdleConnections()
	return closedLoopWith(c, target, body, conns, dur)
}

func closedLoopWith(c *http.Client, target string, body []byte, conns int, dur time.Duration) *loadResult {
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		res    = &loadResult{Gen: "go"}
		start  = time.Now()
		cutoff = start.Add(dur)
	)
	for w := 0; w < conns; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			var n, bad, errs int64
			for {
				t := time.Now()
				if !t.Before(cutoff) {
					break
				}
				code, err := post(c, target, body)
				d := time.Since(t)
				switch {
				case err != nil:
					errs++
					continue
				case code < 200 || code > 299:
					bad++
				}
				n++
				lat = append(lat, d)
			}
			mu.Lock()
			res.Requests += n
			res.Non2xx += bad
			res.SockErr += errs
			res.lat = append(res.lat, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	res.finish()
	return res
}

// postN sends exactly n requests with conns workers and returns how many
// did not get a 2xx.
func postN(proxy, target string, body []byte, n, conns int) (non2xx int64, err error) {
	return postSpread(proxy, []string{target}, body, n, conns)
}

// postSpread is postN over many targets: webhook i goes to
// targets[i % len(targets)].
func postSpread(proxy string, targets []string, body []byte, n, conns int) (non2xx int64, err error) {
	return postEach(proxy, n, conns, func(c *http.Client, i int64) (bool, error) {
		code, err := post(c, targets[int(i-1)%len(targets)], body)
		return err == nil && code >= 200 && code <= 299, err
	})
}

// postEach sends webhooks 1..n through proxy over conns connections, each
// with send, and returns how many did not get a 2xx (send's ok) and the
// first error send gave.
func postEach(proxy string, n, conns int, send func(c *http.Client, i int64) (ok bool, err error)) (non2xx int64, err error) {
	c := newClient(proxy, conns)
	defer c.CloseIdleConnections()
	var (
		next    atomic.Int64
		bad     atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	for w := 0; w < conns; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				ok, err := send(c, i)
				if err != nil {
					errOnce.Do(func() { first = err })
				}
				if !ok {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return bad.Load(), first
}

// wrk

// wrkScript writes the Lua script that makes wrk send absolute-form
// requests: wrk writes wrk.path verbatim as the request target, so setting
// it to a full URL turns wrk into a proxy client. done() prints the summary
// as one JSON line.
func wrkScript(dir, target string, body []byte) (string, error) {
	u, err := url.Parse(target)
	if err != nil {
		return "", err
	}
	script := fmt.Sprintf(`-- generated by hookpace bench
wrk.method = "POST"
wrk.path = %q
wrk.headers["Host"] = %q
wrk.headers["Content-Type"] = "application/json"
wrk.body = %q

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("BENCHJSON {\"requests\":%%d,\"duration_us\":%%d,\"status\":%%d,\"connect\":%%d,\"read\":%%d,\"write\":%%d,\"timeout\":%%d,\"p50\":%%d,\"p99\":%%d,\"p999\":%%d,\"max\":%%d}\n",
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.max))
end
`, target, u.Host, string(body))
	path := filepath.Join(dir, "post.lua")
	return path, os.WriteFile(path, []byte(script), 0o644)
}

func haveWrk() bool {
	_, err := exec.LookPath("wrk")
	return err == nil
}

// runWrk runs wrk against server (host:port) with the script. wrk counts a
// status >= 400 as a status error; the caller cross-checks 2xx on the
// server side.
func runWrk(server, script string, threads, conns int, dur time.Duration) (*loadResult, error) {
	cmd := exec.Command("wrk", "-t"+strconv.Itoa(threads), "-c"+strconv.Itoa(conns),
		"-d"+strconv.Itoa(int(dur.Seconds()))+"s", "--timeout", "10s", "-s", script, "http://"+server+"/")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("wrk: %v\n%s", err, out)
	}
	genCPU := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	var line string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if s, ok := strings.CutPrefix(sc.Text(), "BENCHJSON "); ok {
			line = s
		}
	}
	if line == "" {
		return nil, fmt.Errorf("wrk printed no summary:\n%s", out)
	}
	var s struct {
		Requests, DurationUS, Status, Connect, Read, Write, Timeout int64
		P50, P99, P999, Max                                         int64
	}
	// field names differ in case only, except duration_us
	line = strings.Replace(line, "duration_us", "durationus", 1)
	if err := json.Unmarshal([]byte(line), &s); err != nil {
		return nil, fmt.Errorf("wrk summary %q: %v", line, err)
	}
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	return &loadResult{
		Gen:      "wrk",
		GenCPU:   genCPU,
		Requests: s.Requests,
		Non2xx:   s.Status,
		SockErr:  s.Connect + s.Read + s.Write + s.Timeout,
		Elapsed:  us(s.DurationUS),
		p50:      us(s.P50), p99: us(s.P99), p999: us(s.P999), max: us(s.Max),
	}, nil
}

func sortDurations(d []time.Duration) { slices.Sort(d) }
