// Package natstest runs real nats-server processes for tests: one, or a
// cluster of three with JetStream, on free loopback ports, file storage in
// the test's temporary directory, killed when the test ends (and by the
// kernel if the test process dies first: Pdeathsig).
//
// The binary is built from the module go.mod names (a tool directive), once,
// into $(go env GOCACHE)/../hookpace-nats/<version>, so that later runs on
// the same machine reuse it.
package natstest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/proctest"
)

// Version is the nats-server release go.mod requires.
const Version = "v2.15.3"

// Binary returns the path of the nats-server binary, building it first if
// there is none. Concurrent callers, in this process or another, wait for
// one build (an flock).
func Binary(t testing.TB) string {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	return proctest.Built(t, "nats", Version, "nats-server", filepath.Dir(here), "github.com/nats-io/nats-server/v2")
}

// Server is one nats-server process.
type Server struct {
	Name string
	URL  string // nats://127.0.0.1:PORT
	args []string
	bin  string
	log  string
	t    testing.TB

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	monitor int
}

// Cluster is one or more servers, clustered when more than one.
type Cluster struct {
	Servers []*Server
}

// URLs are the servers' client URLs.
func (c *Cluster) URLs() []string {
	var out []string
	for _, s := range c.Servers {
		out = append(out, s.URL)
	}
	return out
}

// Start runs n servers with JetStream (n = 1, or a cluster of n), and
// returns once every one answers its health check with JetStream ready.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	bin := Binary(t)
	root := t.TempDir()
	client := make([]int, n)
	route := make([]int, n)
	mon := make([]int, n)
	for i := range n {
		client[i], route[i], mon[i] = FreePort(t), FreePort(t), FreePort(t)
	}
	c := &Cluster{}
	for i := range n {
		name := fmt.Sprintf("n%d", i+1)
		dir := filepath.Join(root, name)
		args := []string{"-a", "127.0.0.1", "-p", fmt.Sprint(client[i]), "-m", fmt.Sprint(mon[i]),
			"-n", name, "-js", "-sd", filepath.Join(dir, "js")}
		if n > 1 {
			var routes []string
			for j := range n {
				if j != i {
					routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", route[j]))
				}
			}
			args = append(args, "--cluster_name", "hookpace-test",
				"--cluster", fmt.Sprintf("nats://127.0.0.1:%d", route[i]), "--routes", strings.Join(routes, ","))
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		s := &Server{Name: name, URL: fmt.Sprintf("nats://127.0.0.1:%d", client[i]), args: args, bin: bin,
			log: filepath.Join(dir, "nats-server.log"), t: t, monitor: mon[i]}
		s.start()
		t.Cleanup(func() {
			s.Kill()
			if t.Failed() {
				b, _ := os.ReadFile(s.log)
				if len(b) > 6000 {
					b = b[len(b)-6000:]
				}
				t.Logf("nats-server %s's log (end):\n%s", name, b)
			}
		})
		c.Servers = append(c.Servers, s)
	}
	for _, s := range c.Servers {
		s.WaitReady()
	}
	return c
}

func (s *Server) start() {
	s.t.Helper()
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		s.t.Fatalf("starting nats-server %s: %v", s.Name, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
}

// WaitReady waits until the server reports itself healthy, JetStream
// included (its /healthz), for at most a minute.
func (s *Server) WaitReady() {
	s.t.Helper()
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", s.monitor)
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("nats-server %s not healthy after a minute (last: %v)", s.Name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Pid is the running server's process id (0 when it is stopped).
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Kill ends the server with SIGKILL and waits for it; a stopped server is
// left alone.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-exited
}

// Restart starts a killed server again, on the same ports and store.
func (s *Server) Restart() {
	s.t.Helper()
	s.start()
	s.WaitReady()
}

// FreePort is a loopback port nothing listens on now, for a server a test
// starts later. It is taken from below the kernel's ephemeral range
// (32768 up), where no outgoing connection's local port can land on it
// before the server binds, and never handed out twice by one process.
func FreePort(t testing.TB) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range portSpan {
		p := portLow + (portNext+os.Getpid())%portSpan
		portNext++
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue // another process has it
		}
		l.Close()
		return p
	}
	t.Fatal("no free loopback port below the ephemeral range")
	return 0
}

// The ports FreePort hands out: portLow up to the ephemeral range, each
// process starting at its own offset (its pid) to keep clear of others.
const (
	portLow  = 20000
	portSpan = 32768 - portLow
)

var (
	portsMu  sync.Mutex
	portNext int
)
