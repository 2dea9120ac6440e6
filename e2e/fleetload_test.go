package e2e

import (
	"context"
	bin "encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/proctest"
)

// busyNode puts beside the test what a busy node runs beside hookpace:
// six CPU-bound processes and two writers that sync every block they
// write (64 KiB, dd oflag=dsync) to a file in a temporary folder. They
// run until the test ends, are killed with it (proctest) and, each the
// leader of its own process group, take their children with them.
//
// A fleet's bounds are checked with this load beside the replicas: a
// partner's limit does not care how busy our node is.
func busyNode(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	var scripts []string
	for range 6 {
		scripts = append(scripts, "while :; do :; done")
	}
	for i := range 2 {
		f := filepath.Join(dir, fmt.Sprintf("w%d", i))
		// Each dd writes at most 16 MiB, so one left behind by a killed
		// test ends on its own.
		scripts = append(scripts, fmt.Sprintf("while :; do dd if=/dev/zero of=%s bs=64k count=256 oflag=dsync 2>/dev/null; done", f))
	}
	for _, s := range scripts {
		cmd := proctest.Command("sh", "-c", s)
		cmd.SysProcAttr.Setpgid = true
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting the load %q: %v", s, err)
		}
		t.Cleanup(func() { stopGroup(cmd) })
	}
	t.Logf("beside the test: 6 CPU-bound processes, 2 writers syncing every 64 KiB block")
}

// stopGroup kills cmd's process group and waits for cmd.
func stopGroup(cmd *exec.Cmd) {
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	cmd.Wait()
}

// The fleet's bounds are judged when the requests reach the partner's
// host: the kernel's receive time of their bytes (SO_TIMESTAMPNS), not
// when the partner's handler runs. On this machine the partner shares the
// CPU with the load beside it, and its handler may run hundreds of
// milliseconds after the bytes arrived, bunching arrivals that came
// evenly; a real partner's door does not wait for our node's CPU.

// wireListener enables receive timestamps on every connection it
// accepts.
type wireListener struct{ net.Listener }

func (l wireListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c, nil
	}
	var serr error
	raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
	})
	if serr != nil {
		return c, nil
	}
	return &wireConn{TCPConn: tc, raw: raw, oob: make([]byte, 128)}, nil
}

// wireConn reads with recvmsg and keeps the receive time of the last
// bytes read: a partner's request is answered before the client sends
// the next, so in its handler that is when the request arrived.
type wireConn struct {
	*net.TCPConn
	raw syscall.RawConn
	oob []byte

	mu   sync.Mutex
	last time.Time
}

func (c *wireConn) Read(p []byte) (int, error) {
	var n, oobn int
	var err error
	rerr := c.raw.Read(func(fd uintptr) bool {
		n, oobn, _, _, err = syscall.Recvmsg(int(fd), p, c.oob, 0)
		return err != syscall.EAGAIN
	})
	if rerr != nil {
		return 0, rerr
	}
	if err != nil {
		return 0, err
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	msgs, _ := syscall.ParseSocketControlMessage(c.oob[:oobn])
	for _, m := range msgs {
		if m.Header.Level == syscall.SOL_SOCKET && m.Header.Type == syscall.SCM_TIMESTAMPNS && len(m.Data) >= 16 {
			sec := int64(bin.NativeEndian.Uint64(m.Data[0:8]))
			nsec := int64(bin.NativeEndian.Uint64(m.Data[8:16]))
			c.mu.Lock()
			c.last = time.Unix(sec, nsec)
			c.mu.Unlock()
		}
	}
	return n, nil
}

type wireConnKey struct{}

// wireTime is when the bytes of the request r arrived (zero: unknown).
func wireTime(r *http.Request) time.Time {
	c, _ := r.Context().Value(wireConnKey{}).(*wireConn)
	if c == nil {
		return time.Time{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

var (
	stampsOnce sync.Once
	stampsErr  error
	stampsKeep [2]net.Conn // held for the process: a socket unreferenced is closed by the GC
)

// stampsOn makes sure the kernel stamps what this process receives. The
// first socket that asks for receive times turns stamping on through
// deferred work, so until that has run TCP segments arrive unstamped and
// recvmsg gives no time: on a loaded machine a fleet test's first
// requests came without one. stampsOn asks once per process, on a
// loopback connection it keeps open (the kernel stamps while any socket
// asks), and sends a byte over it until one comes back stamped.
func stampsOn(t *testing.T) {
	t.Helper()
	stampsOnce.Do(func() {
		var in, out net.Conn
		in, out, stampsErr = stampedPair()
		stampsKeep = [2]net.Conn{in, out}
	})
	if stampsErr != nil {
		t.Fatalf("receive timestamps: %v", stampsErr)
	}
}

func stampedPair() (net.Conn, net.Conn, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	defer l.Close()
	out, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		return nil, nil, err
	}
	c, err := wireListener{l}.Accept()
	if err != nil {
		out.Close()
		return nil, nil, err
	}
	in, ok := c.(*wireConn)
	if !ok {
		out.Close()
		c.Close()
		return nil, nil, fmt.Errorf("SO_TIMESTAMPNS could not be set on a loopback connection")
	}
	deadline := time.Now().Add(30 * time.Second)
	for b := make([]byte, 1); time.Now().Before(deadline); {
		if _, err := out.Write(b); err != nil {
			return nil, nil, err
		}
		if _, err := in.Read(b); err != nil {
			return nil, nil, err
		}
		in.mu.Lock()
		stamped := !in.last.IsZero()
		in.mu.Unlock()
		if stamped {
			return in, out, nil
		}
		runtime.Gosched()
	}
	in.Close()
	out.Close()
	return nil, nil, fmt.Errorf("no receive time on loopback within 30 s of asking")
}

// newWireReceiver is NewReceiver with the wire's receive times.
func newWireReceiver(t *testing.T) *Receiver {
	stampsOn(t)
	rc := &Receiver{notify: make(chan struct{}, 1)}
	rc.Server = httptest.NewUnstartedServer(http.HandlerFunc(rc.serve))
	// On the listening socket too: a connection accepted inherits it, and
	// the bytes that arrive before Accept returns are stamped.
	if tl, ok := rc.Server.Listener.(*net.TCPListener); ok {
		if raw, err := tl.SyscallConn(); err == nil {
			raw.Control(func(fd uintptr) {
				syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
			})
		}
	}
	rc.Server.Listener = wireListener{rc.Server.Listener}
	rc.Server.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, wireConnKey{}, c)
	}
	rc.Start()
	t.Cleanup(rc.Close)
	return rc
}

// TestWireReceiverTimes: the fleet's partner knows when each request's
// bytes arrived, over new and reused connections, and never after its
// handler ran.
func TestWireReceiverTimes(t *testing.T) {
	p := newSlowPartner(t, 0)
	for i := range 5 {
		resp, err := http.Post(fmt.Sprintf("%s/wire/%d", p.URL, i), "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	wire, handler := p.Arrivals(), p.handlerArrivals()
	p.mu.Lock()
	known := len(p.wire)
	p.mu.Unlock()
	if len(wire) != 5 || known != 5 {
		t.Fatalf("%d arrivals, %d with a receive time; want 5 and 5", len(wire), known)
	}
	for i := range wire {
		if d := handler[i].At.Sub(wire[i].At); d < 0 || d > 5*time.Second {
			t.Fatalf("request %d: the handler ran %v after its bytes arrived", i, d)
		}
	}
}
