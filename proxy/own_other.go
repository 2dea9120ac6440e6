//go:build !unix

package proxy

import (
	"context"
	"syscall"
)

// bindOwn records nothing where capture does not run (Linux only).
func bindOwn(context.Context, string, string, syscall.RawConn) error { return nil }

// ownPortDial is OwnDial where capture does not run.
func ownPortDial(next DialFunc) DialFunc { return OwnDial(next) }
