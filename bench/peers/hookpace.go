package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hookpace/hookpace/admin"
	"github.com/hookpace/hookpace/internal/procenv"
)

// system is one product under test, started fresh for each measurement.
type system interface {
	name() string
	// start brings the system up on a fresh store with its deliveries to
	// the sink held, and returns how to post webhooks to it.
	start(ctx context.Context, dir, sinkAddr string, conns int) (*poster, error)
	// release lets the held deliveries go.
	release(ctx context.Context) error
	// cpu is the CPU time all of the system's processes used so far.
	cpu() time.Duration
	stop()
}

// ctl reaches admin APIs and readiness endpoints directly, never through a
// proxy from the environment.
var ctl = &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 30 * time.Second}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// child is a started process whose output goes to a log file.
type child struct {
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
	err    error
}

func startChild(cmd *exec.Cmd, logPath string) (*child, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	c := &child{cmd: cmd, log: logPath, exited: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		f.Close()
		close(c.exited)
	}()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

func (c *child) tail() string {
	b, _ := os.ReadFile(c.log)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// stop sends sig and waits up to limit for the exit, then kills.
func (c *child) stop(sig syscall.Signal, limit time.Duration) {
	select {
	case <-c.exited:
		return
	default:
	}
	c.cmd.Process.Signal(sig)
	select {
	case <-c.exited:
	case <-time.After(limit):
		c.cmd.Process.Kill()
		<-c.exited
	}
}

// waitFor polls ok every 50 ms until it is true, c exits or limit passes.
func waitFor(c *child, what string, limit time.Duration, ok func() bool) error {
	deadline := time.Now().Add(limit)
	for !ok() {
		select {
		case <-c.exited:
			return fmt.Errorf("%s exited while waiting for %s: %v\n%s", filepath.Base(c.cmd.Path), what, c.err, c.tail())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s after %v\n%s", what, limit, c.tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

func httpOK(u string) bool {
	resp, err := ctl.Get(u)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// hookpaceSys is the real hookpace binary with product defaults, egress
// allowed to loopback, and a hosts: entry for the sink whose rate is far
// above what the machine can deliver, so that pacing never binds.
type hookpaceSys struct {
	bin         string
	concurrency int
	proc        *child
	adminAddr   string
	sinkHost    string
}

func (h *hookpaceSys) name() string { return "hookpace" }

func (h *hookpaceSys) start(ctx context.Context, dir, sinkAddr string, conns int) (*poster, error) {
	proxyAddr, err := freePort()
	if err != nil {
		return nil, err
	}
	if h.adminAddr, err = freePort(); err != nil {
		return nil, err
	}
	h.sinkHost = sinkAddr
	cfg := fmt.Sprintf(`listen: %s
admin: %s
spool:
  dir: %s
egress:
  allow: ["127.0.0.0/8"]
hosts:
  %q: {rate: 1000000/s, burst: 100000, concurrency: %d}
`, proxyAddr, h.adminAddr, filepath.Join(dir, "spool"), sinkAddr, h.concurrency)
	cfgPath := filepath.Join(dir, "hookpace.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(h.bin, "run", "--config", cfgPath)
	cmd.Env = procenv.WithoutProxy()
	if h.proc, err = startChild(cmd, filepath.Join(dir, "hookpace.log")); err != nil {
		return nil, err
	}
	if err := waitFor(h.proc, "hookpace /readyz", 30*time.Second, func() bool {
		return httpOK("http://" + h.adminAddr + "/readyz")
	}); err != nil {
		return nil, err
	}
	if _, err := admin.NewClient(h.adminAddr).Pause(ctx, sinkAddr); err != nil {
		return nil, fmt.Errorf("pausing the sink's host in hookpace: %w", err)
	}
	proxyURL := &url.URL{Scheme: "http", Host: proxyAddr}
	return newPoster("http://"+sinkAddr+"/hook", http.ProxyURL(proxyURL), conns), nil
}

func (h *hookpaceSys) release(ctx context.Context) error {
	if _, err := admin.NewClient(h.adminAddr).Resume(ctx, h.sinkHost); err != nil {
		return fmt.Errorf("resuming the sink's host in hookpace: %w", err)
	}
	return nil
}

func (h *hookpaceSys) cpu() time.Duration { return treeCPU([]int{h.proc.pid()}) }

func (h *hookpaceSys) stop() {
	if h.proc != nil {
		h.proc.stop(syscall.SIGKILL, 10*time.Second)
	}
}
