//go:build !linux

package server

import "net"

// quickAckListener leaves connections as they are: TCP_QUICKACK is
// Linux's (see quickack_linux.go).
type quickAckListener struct{ net.Listener }
