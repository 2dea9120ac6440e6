package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/hookpace/hookpace/egress"
	"github.com/hookpace/hookpace/hostname"
	"github.com/hookpace/hookpace/mitm"
	"github.com/hookpace/hookpace/pacer"
)

// Value checks used by resolve. Each returns an error phrased to follow the
// field name: "spool.max_messages: must be at least 1, got 0".

func atLeast[T int | int64](lo T) func(T) error {
	return func(v T) error {
		if v < lo {
			return fmt.Errorf("must be at least %d, got %d", lo, v)
		}
		return nil
	}
}

func intWithin(lo, hi int) func(int) error {
	return func(v int) error {
		if v < lo || v > hi {
			return fmt.Errorf("must be between %d and %d, got %d", lo, hi, v)
		}
		return nil
	}
}

// rateBounds holds a rate to what the pacer works with: at most 1e6/s, at
// least one per ten hours.
func rateBounds(r Rate) error {
	if ps := r.PerSecond(); ps > pacer.RateMax || ps < pacer.RateMin {
		return fmt.Errorf("must be between 0.1/h and %g/s, got %g/s", float64(pacer.RateMax), ps)
	}
	return nil
}

func positive(d Duration) error {
	if d <= 0 {
		return fmt.Errorf("must be positive, got %s", d)
	}
	return nil
}

// notNegative accepts 0 (off) or a positive duration.
func notNegative(d Duration) error {
	if d < 0 {
		return fmt.Errorf("must be 0 (off) or positive, got %s", d)
	}
	return nil
}

// within checks lo..hi with each bound inclusive or not; NaN fails.
func within(lo, hi float64, loIncl, hiIncl bool) func(float64) error {
	return func(v float64) error {
		if (v > lo || loIncl && v == lo) && (v < hi || hiIncl && v == hi) {
			return nil
		}
		l, h := "(", ")"
		if loIncl {
			l = "["
		}
		if hiIncl {
			h = "]"
		}
		return fmt.Errorf("must be in %s%g, %g%s, got %g", l, lo, hi, h, v)
	}
}

func sizeWithin(lo, hi ByteSize) func(ByteSize) error {
	return func(v ByteSize) error {
		if v < lo || v > hi {
			return fmt.Errorf("must be between %s and %s, got %s", lo, hi, v)
		}
		return nil
	}
}

func oneOf(allowed ...string) func(string) error {
	return func(v string) error {
		for _, a := range allowed {
			if v == a {
				return nil
			}
		}
		return fmt.Errorf("must be one of %s, got %q", strings.Join(allowed, ", "), v)
	}
}

func nonEmpty(s string) error {
	if strings.TrimSpace(s) == "" {
		return fmt.Errorf("must not be empty")
	}
	return nil
}

func checkUsername(s string) error {
	if strings.Contains(s, ":") {
		return fmt.Errorf("must not contain ':' (Basic auth separator)")
	}
	return nonEmpty(s)
}

func checkRetry4xx(code int) error {
	switch {
	case code == 429:
		return fmt.Errorf("429 must not be listed: it always holds the host and retries")
	case code < 400 || code > 499:
		return fmt.Errorf("want a 4xx status code (400..499), got %d", code)
	}
	return nil
}

// checkSpoolMethod accepts the methods a webhook is sent with.
func checkSpoolMethod(m string) error {
	switch strings.ToUpper(m) {
	case "POST", "PUT", "PATCH", "DELETE":
		return nil
	}
	return fmt.Errorf("want POST, PUT, PATCH or DELETE, got %q", m)
}

// checkListen accepts "host:port", ":port" and port 0 (any free port).
func checkListen(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("malformed address %q: want host:port", s)
	}
	if err := checkPort(port, true); err != nil {
		return fmt.Errorf("address %q: %w", s, err)
	}
	if _, err := netip.ParseAddr(host); host != "" && err != nil {
		if err := hostname.Check(host); err != nil {
			return fmt.Errorf("address %q: %w", s, err)
		}
	}
	return nil
}

// checkEgressEntry is egress's own parser for allow and deny entries (a
// CIDR, an IP address, or a host name, optionally "*." prefixed), so that
// check-config refuses exactly what a start refuses.
func checkEgressEntry(s string) error { return egress.CheckRule(s) }

// checkExclude is the open-world CA's own parser for a name it excludes.
func checkExclude(s string) error {
	_, err := mitm.OpenNames([]string{s})
	return err
}

// checkMITMHost is the CA's own parser for a name it may vouch for.
func checkMITMHost(s string) error {
	_, err := mitm.ParseNames([]string{s})
	return err
}

// checkPort accepts 1..65535, or 0 when zeroOK (listen on any free port).
func checkPort(p string, zeroOK bool) error {
	n, err := strconv.Atoi(p)
	if err != nil || strings.HasPrefix(p, "+") || n < 0 || n > 65535 || (n == 0 && !zeroOK) {
		return fmt.Errorf("malformed port %q", p)
	}
	return nil
}
