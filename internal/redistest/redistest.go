// Package redistest starts a real redis-server for tests: on a free
// loopback port, persistence off, stopped when the test ends. A test that
// needs Redis fails (never skips) when the binary is missing.
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/proctest"
)

// Server is one redis-server process.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	// pre goes before and extra after the port and persistence options
	// (a config file; cluster or replica options); extra may name
	// {port} and {port2}, a second free port for the cluster bus.
	pre, extra []string
	port2      int

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan error // receives the exit of cmd
}

// Binary returns the redis-server binary, or fails the test.
func Binary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not found (install it: apt-get install -y redis-server): %v", err)
	}
	return bin
}

// Start starts redis-server on a free loopback port and stops it at the
// end of the test.
func Start(t testing.TB) *Server {
	t.Helper()
	return startWith(t, &Server{t: t, bin: Binary(t), dir: t.TempDir()})
}

// Launch starts redis-server as Start does, its files in dir, for a
// program that is not a test (bench/): the caller stops it with Kill,
// and it dies with the calling process if that goes first. Restart is
// for a Server of Start.
func Launch(dir string) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found (install it: apt-get install -y redis-server): %w", err)
	}
	s := &Server{bin: bin, dir: dir}
	if err := s.startFree(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	return s, nil
}

// startWith starts s on free ports, and kills it when the test ends.
func startWith(t testing.TB, s *Server) *Server {
	t.Helper()
	if err := s.startFree(); err != nil {
		t.Fatalf("start %s: %v", s.bin, err)
	}
	t.Cleanup(s.Kill)
	return s
}

// startFree starts s on free ports (fresh ones after a failure).
func (s *Server) startFree() error {
	var err error
	for range 10 {
		s.port, err = freePort()
		if err != nil {
			continue
		}
		if s.port2, err = freePort(); err != nil {
			continue
		}
		if err = s.start(); err == nil {
			return nil
		}
	}
	return err
}

// Pid is the server's process id, 0 once it was killed.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Port is the server's port.
func (s *Server) Port() int { return s.port }

// Addr is host:port of the server.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is a redis:// URL for the server.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs redis-server on s.port and waits until it answers PING. It
// fails (and the caller may pick another port) if the port is taken.
func (s *Server) start() error {
	args := append(append([]string(nil), s.pre...), "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--daemonize", "no",
		"--loglevel", "warning")
	for _, a := range s.extra {
		a = strings.ReplaceAll(a, "{port2}", strconv.Itoa(s.port2))
		args = append(args, strings.ReplaceAll(a, "{port}", strconv.Itoa(s.port)))
	}
	cmd := proctest.Command(s.bin, args...) // gone with the test process, even one killed hung
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("run %s: %w", s.bin, err)
	}
	exited := make(chan error, 1)
	var logMu sync.Mutex
	var logTail []string
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			logMu.Lock()
			logTail = append(logTail, sc.Text())
			logMu.Unlock()
		}
		exited <- cmd.Wait()
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ping(s.Addr()) == nil {
			s.mu.Lock()
			s.cmd, s.exited = cmd, exited
			s.mu.Unlock()
			return nil
		}
		select {
		case err := <-exited:
			logMu.Lock()
			defer logMu.Unlock()
			return fmt.Errorf("%s on port %d exited (%v): %s", s.bin, s.port, err, strings.Join(logTail, "\n"))
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited
			return fmt.Errorf("redis-server on port %d did not answer PING within 10s", s.port)
		}
	}
}

// ping sends PING over a raw connection and wants +PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// Kill stops the server with SIGKILL (its data is gone: persistence is
// off) and waits for it to exit. Killing a stopped server does nothing.
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

// Freeze stops the server with SIGSTOP: it keeps its connections and
// answers nothing, as a Redis that hangs. Thaw resumes it.
func (s *Server) Freeze() { s.signal(syscall.SIGSTOP) }

// Thaw undoes Freeze.
func (s *Server) Thaw() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		s.cmd.Process.Signal(sig)
	}
}

// Restart starts a killed server again on the same port, empty.
func (s *Server) Restart() {
	s.t.Helper()
	var err error
	for range 5 {
		if err = s.start(); err == nil {
			return
		}
	}
	s.t.Fatalf("restart redis-server: %v", err)
}
