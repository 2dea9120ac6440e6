package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// The classes of a transport error: the error_type of a delivery attempt
// that got no answer, and the first word of its log line's reason. They are
// few and stable, so that a metric label has few values.
const (
	ErrTimeout  = "timeout"  // a deadline passed (dial, TLS, headers or the whole attempt)
	ErrDNS      = "dns"      // the name did not resolve
	ErrConnect  = "connect"  // the TCP connection was not made (refused, unreachable)
	ErrTLS      = "tls"      // the handshake or the certificate failed
	ErrReset    = "reset"    // the connection was reset or broken
	ErrClosed   = "closed"   // the connection closed before an answer (EOF)
	ErrEgress   = "egress"   // the egress guard refused the address
	ErrCanceled = "canceled" // hookpace gave up the attempt (shutdown)
	ErrOther    = "error"    // anything else
)

// ErrorClass names the class of a transport error (one of the Err*
// constants).
func ErrorClass(err error) string {
	var dns *net.DNSError
	var op *net.OpError
	var refused interface{ Refused() string }
	switch {
	case err == nil:
		return ErrOther
	case errors.As(err, &refused):
		return ErrEgress
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return ErrTimeout
	case errors.Is(err, context.Canceled):
		return ErrCanceled
	case errors.As(err, &dns):
		return ErrDNS
	case isTLS(err):
		return ErrTLS
	case errors.As(err, &op) && op.Op == "dial":
		return ErrConnect
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNABORTED) || strings.Contains(err.Error(), "connection reset"):
		return ErrReset
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return ErrClosed
	default:
		return ErrOther
	}
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

func isTLS(err error) bool {
	var rh tls.RecordHeaderError
	var alert tls.AlertError
	var verify *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalid x509.CertificateInvalidError
	return errors.As(err, &rh) || errors.As(err, &alert) || errors.As(err, &verify) ||
		errors.As(err, &unknown) || errors.As(err, &hostErr) || errors.As(err, &invalid) ||
		strings.Contains(err.Error(), "tls: ")
}
