package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Rate is a number of events per period, written "10/s", "600/m" or "5/h".
// The period is kept as written so that String round-trips.
type Rate struct {
	Count float64
	Per   time.Duration
}

var rateUnits = map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}

// ParseRate parses "N/s", "N/m" or "N/h". N may be fractional ("0.5/s")
// and must be positive.
func ParseRate(s string) (Rate, error) {
	num, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	per, known := rateUnits[strings.TrimSpace(unit)]
	if !ok || !known {
		return Rate{}, fmt.Errorf("malformed rate %q: want N/s, N/m or N/h", s)
	}
	n, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
		return Rate{}, fmt.Errorf("malformed rate %q: want N/s, N/m or N/h", s)
	}
	if n <= 0 {
		return Rate{}, fmt.Errorf("rate %q must be positive", s)
	}
	return Rate{Count: n, Per: per}, nil
}

// PerSecond returns the rate in events per second (0 for the zero Rate).
func (r Rate) PerSecond() float64 {
	if r.Per <= 0 {
		return 0
	}
	return r.Count / r.Per.Seconds()
}

// String formats the rate as it is written in the config, e.g. "10/s".
func (r Rate) String() string {
	unit := "s"
	switch r.Per {
	case time.Minute:
		unit = "m"
	case time.Hour:
		unit = "h"
	case time.Second, 0:
	default:
		return strconv.FormatFloat(r.PerSecond(), 'f', -1, 64) + "/s"
	}
	return strconv.FormatFloat(r.Count, 'f', -1, 64) + "/" + unit
}

// MarshalText implements encoding.TextMarshaler (used for JSON dumps).
func (r Rate) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (r *Rate) UnmarshalText(b []byte) error {
	v, err := ParseRate(string(b))
	if err == nil {
		*r = v
	}
	return err
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (r *Rate) UnmarshalYAML(n *yaml.Node) error {
	return r.UnmarshalText([]byte(scalarText(n)))
}

// ByteSize is a number of bytes, written "1GiB", "512MiB", "64KiB", "1MB",
// "100B" or a plain integer. KiB/MiB/GiB are powers of 1024, KB/MB/GB are
// powers of 1000; units are case-insensitive.
type ByteSize int64

var sizeUnits = []struct {
	name string
	mult int64
}{
	// Longest suffixes first so "KiB" is not read as "B".
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"b", 1},
}

// ParseByteSize parses a size such as "512MiB" or "1000000". Fractions are
// allowed when they give a whole number of bytes ("1.5KiB" = 1536).
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.name) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.name)), u.mult
			break
		}
	}
	bad := fmt.Errorf("malformed size %q: want e.g. 1GiB, 512MiB, 64KiB, 1MB or a number of bytes", s)
	if t == "" {
		return 0, bad
	}
	if n, err := strconv.ParseInt(t, 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("size %q must not be negative", s)
		}
		if n > math.MaxInt64/mult {
			return 0, fmt.Errorf("size %q is too large", s)
		}
		return ByteSize(n * mult), nil
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, bad
	}
	if f < 0 {
		return 0, fmt.Errorf("size %q must not be negative", s)
	}
	b := f * float64(mult)
	if b >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	if b != math.Trunc(b) {
		return 0, fmt.Errorf("size %q is not a whole number of bytes", s)
	}
	return ByteSize(b), nil
}

// String formats the size with the largest unit that divides it exactly,
// preferring binary units: 1GiB, 1MB, 1500B.
func (b ByteSize) String() string {
	if b != 0 {
		for _, units := range [][]string{{"tib", "gib", "mib", "kib"}, {"tb", "gb", "mb", "kb"}} {
			for _, name := range units {
				for _, u := range sizeUnits {
					if u.name == name && int64(b)%u.mult == 0 {
						return strconv.FormatInt(int64(b)/u.mult, 10) + displayUnit(name)
					}
				}
			}
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

func displayUnit(name string) string {
	if len(name) == 3 { // "kib" -> "KiB"
		return strings.ToUpper(name[:1]) + "iB"
	}
	return strings.ToUpper(name)
}

// MarshalText implements encoding.TextMarshaler.
func (b ByteSize) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (b *ByteSize) UnmarshalText(t []byte) error {
	v, err := ParseByteSize(string(t))
	if err == nil {
		*b = v
	}
	return err
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	return b.UnmarshalText([]byte(scalarText(n)))
}

// Duration is a time.Duration written as Go writes it: "10s", "250ms", "1h30m".
// A bare number is rejected: the unit must be explicit.
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats the duration like time.Duration does ("1m30s").
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("malformed duration %q: want e.g. 10s, 250ms, 5m or 72h", s)
	}
	*d = Duration(v)
	return nil
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	return d.UnmarshalText([]byte(scalarText(n)))
}

// scalarText returns the text of a scalar node, or a description of the
// node's kind so that parse errors say what was found instead.
func scalarText(n *yaml.Node) string {
	switch n.Kind {
	case yaml.ScalarNode:
		return n.Value
	case yaml.MappingNode:
		return "<mapping>"
	case yaml.SequenceNode:
		return "<list>"
	}
	return "<" + strings.TrimPrefix(n.ShortTag(), "!!") + ">"
}
