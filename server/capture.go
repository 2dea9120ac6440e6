package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/hookpace/hookpace/config"
)

// The capture listener (capture.listen) takes connections the kernel
// redirected to it (`hookpace capture rules`), reads where each was going
// (originalDst, Linux only) and hands it to the proxy (proxy.ServeCapture),
// which serves it as the proxy listener would a CONNECT or a proxy-form
// request. Its address is one of hookpace's own, which the egress guard
// never dials.

// listenCapture binds capture.listen, when set.
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
	a.captureLn = ln
	a.undo = append(a.undo, func() { ln.Close() })
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
			a.proxy.ServeCapture(ctx, withQuickAck(c), dst)
		}()
	}
}

// selfAddrs are hookpace's own listeners' addresses, never a delivery
// target.
func (a *app) selfAddrs() []string {
	s := []string{a.proxyLn.Addr().String(), a.adminLn.Addr().String()}
	if a.captureLn != nil {
		s = append(s, a.captureLn.Addr().String())
	}
	return s
}
