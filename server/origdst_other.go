//go:build !linux

package server

import (
	"errors"
	"net"
	"net/netip"
)

// originalDst needs Linux's conntrack (SO_ORIGINAL_DST).
func originalDst(net.Conn) (netip.AddrPort, error) {
	return netip.AddrPort{}, errors.New("capture.listen needs Linux: the original destination of a redirected connection is read with SO_ORIGINAL_DST")
}

// captureSupported: the capture listener works on Linux only.
const captureSupported = false
