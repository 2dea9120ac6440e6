//go:build linux

package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"
)

// originalDst is where a connection REDIRECTed to the capture listener was
// going: conntrack's original destination, SO_ORIGINAL_DST (IPv4) or
// IP6T_SO_ORIGINAL_DST (IPv6), read on the accepted socket.
func originalDst(c net.Conn) (netip.AddrPort, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("original destination: %T is not a TCP connection", c)
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("original destination: %w", err)
	}
	la, _ := tc.LocalAddr().(*net.TCPAddr)
	v4 := la != nil && la.IP.To4() != nil
	var dst netip.AddrPort
	var serr error
	err = raw.Control(func(fd uintptr) {
		if v4 {
			// struct sockaddr_in, in the first 16 bytes of an ipv6_mreq.
			m, err := unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_IP, unix.SO_ORIGINAL_DST)
			if err != nil {
				serr = err
				return
			}
			b := m.Multiaddr
			dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:4]))
			return
		}
		// struct sockaddr_in6, in an ip6_mtuinfo.
		m, err := unix.GetsockoptIPv6MTUInfo(int(fd), unix.SOL_IPV6, ip6tSOOriginalDst)
		if err != nil {
			serr = err
			return
		}
		// The port is in network byte order, read as a native uint16.
		port := binary.BigEndian.Uint16(binary.NativeEndian.AppendUint16(nil, m.Addr.Port))
		dst = netip.AddrPortFrom(netip.AddrFrom16(m.Addr.Addr), port)
	})
	if err == nil {
		err = serr
	}
	if errors.Is(err, unix.ENOENT) {
		return netip.AddrPort{}, errors.New("original destination: no conntrack entry: the connection was not redirected")
	}
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("original destination (getsockopt SO_ORIGINAL_DST): %w", err)
	}
	return dst, nil
}

// ip6tSOOriginalDst is IP6T_SO_ORIGINAL_DST (linux/netfilter_ipv6/ip6_tables.h),
// which x/sys/unix does not name.
const ip6tSOOriginalDst = 80

// captureSupported: the capture listener works on Linux.
const captureSupported = true
