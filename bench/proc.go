package main

// Processes under test: hookpace itself (the real binary, one process per
// measurement, each on a fresh spool dir) and the sink processes.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hookpace/hookpace/internal/procenv"
	"github.com/hookpace/hookpace/internal/proctest"
)

// ctl talks to admin APIs and sink control endpoints, never via a proxy.
var ctl = &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 30 * time.Second}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// hostCfg is one entry under hosts: in hookpace's config.
type hostCfg struct {
	key         string // "127.0.0.1:port"
	rate        string // "200/s"
	burst       int
	concurrency int
}

type hpConfig struct {
	logLevel    string
	bigSpool    bool // 5M messages / 8GiB, so that no benchmark meets backpressure
	hosts       []hostCfg
	extraEnv    []string
	defaultRate string
	// defaultBurst, with defaultRate, is the defaults' burst (0: the product's).
	defaultBurst int
	extra        string // more YAML, appended (fleet: ...)
}

// hookpace is one running hookpace process.
type hookpace struct {
	bin, dir   string
	proxy      string
	admin      string
	cmd        *exec.Cmd
	logPath    string
	exited     chan struct{}
	exitErr    error
	configText string
}

func startHookpace(bin, parent, name string, c hpConfig) (*hookpace, error) {
	dir, err := os.MkdirTemp(parent, name+"-")
	if err != nil {
		return nil, err
	}
	h := &hookpace{bin: bin, dir: dir, exited: make(chan struct{})}
	if h.proxy, err = freePort(); err != nil {
		return nil, err
	}
	if h.admin, err = freePort(); err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "listen: %s\nadmin: %s\n", h.proxy, h.admin)
	fmt.Fprintf(&b, "log:\n  level: %s\n", c.logLevel)
	fmt.Fprintf(&b, "spool:\n  dir: %s\n", filepath.Join(dir, "spool"))
	if c.bigSpool {
		b.WriteString("  max_messages: 5000000\n  max_bytes: 8GiB\n")
	}
	if c.defaultRate != "" {
		fmt.Fprintf(&b, "defaults:\n  rate: %s\n", c.defaultRate)
		if c.defaultBurst > 0 {
			fmt.Fprintf(&b, "  burst: %d\n", c.defaultBurst)
		}
	}
	b.WriteString("egress:\n  allow: [\"127.0.0.0/8\"]\n")
	b.WriteString("shutdown:\n  timeout: 2s\n")
	if len(c.hosts) > 0 {
		b.WriteString("hosts:\n")
		for _, hc := range c.hosts {
			fmt.Fprintf(&b, "  %q: {rate: %s, burst: %d, concurrency: %d}\n", hc.key, hc.rate, hc.burst, hc.concurrency)
		}
	}
	b.WriteString(c.extra)
	h.configText = b.String()
	cfgPath := filepath.Join(dir, "hookpace.yaml")
	if err := os.WriteFile(cfgPath, []byte(h.configText), 0o644); err != nil {
		return nil, err
	}
	h.logPath = filepath.Join(dir, "hookpace.log")
	if err := h.launch(cfgPath, c, "start", 30*time.Second); err != nil {
		return nil, err
	}
	return h, nil
}

// launch runs hookpace on cfgPath, logging to h.logPath, and waits up to
// limit for /readyz; what is "start" or "restart" in the errors.
func (h *hookpace) launch(cfgPath string, c hpConfig, what string, limit time.Duration) error {
	logf, err := os.Create(h.logPath)
	if err != nil {
		return err
	}
	h.cmd = exec.Command(h.bin, "run", "--config", cfgPath)
	h.cmd.Stdout, h.cmd.Stderr = logf, logf
	// hookpace must not use proxy settings of its own environment.
	h.cmd.Env = append(procenv.WithoutProxy(), c.extraEnv...)
	proctest.DieWithParent(h.cmd) // a bench killed midway leaves no hookpace running
	if err := h.cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	go func() {
		h.exitErr = h.cmd.Wait()
		logf.Close()
		close(h.exited)
	}()
	deadline := time.Now().Add(limit)
	for {
		select {
		case <-h.exited:
			return fmt.Errorf("hookpace exited at %s: %v\n%s", what, h.exitErr, h.tail())
		default:
		}
		if resp, err := ctl.Get("http://" + h.admin + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			h.kill()
			return fmt.Errorf("hookpace not ready %v after %s\n%s", limit, what, h.tail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (h *hookpace) pid() int { return h.cmd.Process.Pid }

func (h *hookpace) tail() string {
	b, _ := os.ReadFile(h.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// kill stops hookpace with SIGKILL (nothing it holds matters after a
// measurement) and removes its spool unless keep.
func (h *hookpace) kill() {
	select {
	case <-h.exited:
	default:
		h.cmd.Process.Signal(syscall.SIGKILL)
		<-h.exited
	}
}

func (h *hookpace) cleanup(keep bool) {
	h.kill()
	if !keep {
		os.RemoveAll(h.dir)
	}
}

// pause uses the CLI, as an operator would.
func (h *hookpace) pause(host string) error {
	out, err := exec.Command(h.bin, "pause", "--admin", h.admin, host).CombinedOutput()
	if err != nil {
		return fmt.Errorf("hookpace pause %s: %v: %s", host, err, out)
	}
	return nil
}

// resume uses the admin API directly, so that its timing is tight.
func (h *hookpace) resume(host string) error {
	// JSON: the admin API refuses a state-changing request a web form could send.
	resp, err := ctl.Post("http://"+h.admin+"/v1/hosts/"+url.PathEscape(host)+"/resume", "application/json", strings.NewReader("{}"))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("resume %s: %s %s", host, resp.Status, b)
	}
	return nil
}

type spoolUsage struct {
	Messages  int64 `json:"messages"`
	Bytes     int64 `json:"bytes"`
	Accepting bool  `json:"accepting"`
}

func (h *hookpace) spool() (spoolUsage, error) {
	var u spoolUsage
	err := getJSON("http://"+h.admin+"/v1/spool", &u)
	return u, err
}

// waitQueued waits until the spool holds at least n messages.
func (h *hookpace) waitQueued(n int64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		u, err := h.spool()
		if err == nil && u.Messages >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("spool holds %d messages after %v, want %d (err %v)", u.Messages, limit, n, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ingestOutcomes scrapes hookpace_ingest_requests_total by outcome.
func (h *hookpace) ingestOutcomes() (map[string]float64, error) {
	resp, err := ctl.Get("http://" + h.admin + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "hookpace_ingest_requests_total{") {
			continue
		}
		i := strings.Index(line, `outcome="`)
		if i < 0 {
			continue
		}
		rest := line[i+len(`outcome="`):]
		j := strings.IndexByte(rest, '"')
		fields := strings.Fields(line)
		v, _ := strconv.ParseFloat(fields[len(fields)-1], 64)
		out[rest[:j]] += v
	}
	return out, sc.Err()
}

func getJSON(u string, v any) error {
	resp, err := ctl.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// sink processes

type sinkProc struct {
	cmd   *exec.Cmd
	addrs []string
}

func startSink(n, status int, record string) (*sinkProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-role", "sink", "-sink-listeners", strconv.Itoa(n),
		"-sink-status", strconv.Itoa(status), "-sink-record", record)
	cmd.Stderr = os.Stderr
	cmd.Env = procenv.WithoutProxy()
	proctest.DieWithParent(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("sink did not start: %v", err)
	}
	addrs, ok := strings.CutPrefix(strings.TrimSpace(line), "SINK ")
	if !ok {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("sink said %q", line)
	}
	return &sinkProc{cmd: cmd, addrs: strings.Split(addrs, ",")}, nil
}

func (s *sinkProc) pid() int { return s.cmd.Process.Pid }

func (s *sinkProc) stop() {
	s.cmd.Process.Kill()
	s.cmd.Wait()
}

func sinkStatsOf(addr string) (sinkStats, error) {
	var st sinkStats
	err := getJSON("http://"+addr+"/__stats", &st)
	return st, err
}

func sinkTimes(addr string) ([]int64, error) {
	var t []int64
	err := getJSON("http://"+addr+"/__times", &t)
	return t, err
}

// waitCount waits until the sink endpoint has counted at least n requests.
func waitCount(addr string, n int64, limit time.Duration) (sinkStats, error) {
	deadline := time.Now().Add(limit)
	for {
		st, err := sinkStatsOf(addr)
		if err == nil && st.Count >= n {
			return st, nil
		}
		if time.Now().After(deadline) {
			return st, fmt.Errorf("receiver %s got %d of %d within %v (err %v)", addr, st.Count, n, limit, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
