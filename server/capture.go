package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/hookpace/hookpace/config"
)

// The capture listener (capture.listen) takes connections the kernel
// redirected to it (`hookpace capture rules`), reads where each was going
// (originalDst, Linux only) and hands it to the proxy (proxy.ServeCapture),
// which intercepts what can be a webhook and splices the rest. Its
// address is one of hookpace's own, which the egress guard never dials.

// listenCapture binds capture.listen, when set. The rules redirect IPv4 to
// 127.0.0.1 and IPv6 to ::1: a listen address of 127.0.0.1 is bound on
// ::1 too (when the kernel has IPv6), so that both families are served.
func (a *app) listenCapture(cfg *config.Config) error {
	if cfg.Capture.Listen == "" {
		return nil
	}
	if !captureSupported {
		_, err := originalDst(nil)
		return cfg.FieldError("capture.listen", err)
	}
	ln, err := net.Listen("tcp", cfg.Capture.Listen)
	if err != nil {
		return fmt.Errorf("capture listen %s: %w", cfg.Capture.Listen, err)
	}
	host, port, _ := net.SplitHostPort(cfg.Capture.Listen)
	if host == "127.0.0.1" {
		if ln6, err := net.Listen("tcp", net.JoinHostPort("::1", port)); err == nil {
			ln = newDualListener(ln, ln6)
		} else {
			a.log.Info("capture: IPv6 is not captured: no listener on [::1]:"+port, "error", err)
		}
	}
	a.captureLn = ln
	a.undo = append(a.undo, func() { ln.Close() })
	checkCaptureRules(a.log)
	return nil
}

// serveCapture accepts redirected connections until the listener closes.
func (a *app) serveCapture() error {
	if a.captureLn == nil {
		return nil
	}
	// The requests inside are held to the proxy listener's limits.
	ctx := context.WithValue(context.Background(), http.ServerContextKey, a.proxySrv)
	for {
		c, err := a.captureLn.Accept()
		if errors.Is(err, net.ErrClosed) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("capture accept: %w", err)
		}
		go func() {
			dst, err := originalDst(c)
			if err != nil {
				a.log.Warn("capture: connection refused", "remote", c.RemoteAddr().String(), "error", err)
				c.Close()
				return
			}
			a.proxy.ServeCapture(ctx, c, dst, withQuickAck)
		}()
	}
}

// selfAddrs are hookpace's own listeners' addresses, never a delivery
// target.
func (a *app) selfAddrs() []string {
	s := []string{a.proxyLn.Addr().String(), a.adminLn.Addr().String()}
	if d, ok := a.captureLn.(*dualListener); ok {
		for _, l := range d.lns {
			s = append(s, l.Addr().String())
		}
	} else if a.captureLn != nil {
		s = append(s, a.captureLn.Addr().String())
	}
	return s
}

// dualListener accepts from two listeners (IPv4 and IPv6) as one; its
// address is the first's.
type dualListener struct {
	lns  []net.Listener
	conn chan net.Conn
	errc chan error
	once sync.Once
	done chan struct{}
}

func newDualListener(lns ...net.Listener) *dualListener {
	d := &dualListener{lns: lns, conn: make(chan net.Conn), errc: make(chan error, len(lns)), done: make(chan struct{})}
	for _, l := range lns {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					d.errc <- err
					return
				}
				select {
				case d.conn <- c:
				case <-d.done:
					c.Close()
					return
				}
			}
		}()
	}
	return d
}

func (d *dualListener) Accept() (net.Conn, error) {
	select {
	case c := <-d.conn:
		return c, nil
	case err := <-d.errc:
		d.Close()
		return nil, err
	case <-d.done:
		return nil, net.ErrClosed
	}
}

func (d *dualListener) Close() error {
	d.once.Do(func() {
		close(d.done)
		for _, l := range d.lns {
			l.Close()
		}
	})
	return nil
}

func (d *dualListener) Addr() net.Addr { return d.lns[0].Addr() }

// uidOwner finds the uid a capture rule exempts.
var uidOwner = regexp.MustCompile(`--uid-owner (\d+)`)

// checkCaptureRules compares hookpace's euid with the uid the capture
// rules in this network namespace exempt, when it can read them, and
// says what it found: a mismatch is a loop (every delivery captured back
// to hookpace, refused with 508).
func checkCaptureRules(log *slog.Logger) {
	euid := os.Geteuid()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "iptables", "-w", "-t", "nat", "-S", "HOOKPACE_OUTPUT").CombinedOutput()
	if err != nil {
		log.Info("capture: the capture rules cannot be read here; they must exempt hookpace's uid (hookpace capture rules --exclude-uid "+
			strconv.Itoa(euid)+")", "uid", euid, "error", err)
		return
	}
	m := uidOwner.FindSubmatch(out)
	switch {
	case m == nil:
		log.Warn("capture: the capture rules (HOOKPACE_OUTPUT) exempt no uid: hookpace's own connections would be captured back to it",
			"uid", euid, "fix", "hookpace capture rules --exclude-uid "+strconv.Itoa(euid)+" --apply")
	case string(m[1]) != strconv.Itoa(euid):
		log.Warn("capture: the capture rules exempt uid "+string(m[1])+", not hookpace's uid "+strconv.Itoa(euid)+
			": its own connections are captured back to it and refused (508 Loop Detected)", "uid", euid, "exempt", string(m[1]),
			"fix", "hookpace capture rules --exclude-uid "+strconv.Itoa(euid)+" --apply")
	default:
		log.Info("capture: the capture rules exempt hookpace's uid", "uid", euid)
	}
}
