package config

import (
	"strings"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	tests := []struct {
		in      string
		want    Rate
		perSec  float64
		str     string
		wantErr string
	}{
		{in: "10/s", want: Rate{10, time.Second}, perSec: 10, str: "10/s"},
		{in: "600/m", want: Rate{600, time.Minute}, perSec: 10, str: "600/m"},
		{in: "0.5/s", want: Rate{0.5, time.Second}, perSec: 0.5, str: "0.5/s"},
		{in: "36/h", want: Rate{36, time.Hour}, perSec: 0.01, str: "36/h"},
		{in: " 2 / s ", want: Rate{2, time.Second}, perSec: 2, str: "2/s"},
		{in: "2/x", wantErr: `malformed rate "2/x": want N/s, N/m or N/h`},
		{in: "10", wantErr: "malformed rate"},
		{in: "/s", wantErr: "malformed rate"},
		{in: "ten/s", wantErr: "malformed rate"},
		{in: "NaN/s", wantErr: "malformed rate"},
		{in: "Inf/s", wantErr: "malformed rate"},
		{in: "0/s", wantErr: "must be positive"},
		{in: "-1/m", wantErr: "must be positive"},
	}
	for _, tt := range tests {
		got, err := ParseRate(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseRate(%q) error = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want || got.PerSecond() != tt.perSec || got.String() != tt.str {
			t.Errorf("ParseRate(%q) = %+v (%v/s, %q), %v; want %+v (%v/s, %q)",
				tt.in, got, got.PerSecond(), got.String(), err, tt.want, tt.perSec, tt.str)
		}
	}
	if (Rate{}).PerSecond() != 0 {
		t.Error("zero Rate PerSecond != 0")
	}
}

func TestParseByteSize(t *testing.T) {
	tests := []struct {
		in      string
		want    ByteSize
		str     string
		wantErr string
	}{
		{in: "1GiB", want: 1 << 30, str: "1GiB"},
		{in: "512MiB", want: 512 << 20, str: "512MiB"},
		{in: "64KiB", want: 64 << 10, str: "64KiB"},
		{in: "1MB", want: 1_000_000, str: "1MB"},
		{in: "2kb", want: 2000, str: "2KB"},
		{in: "3GB", want: 3_000_000_000, str: "3GB"},
		{in: "100B", want: 100, str: "100B"},
		{in: "1048576", want: 1 << 20, str: "1MiB"},
		{in: "1 gib", want: 1 << 30, str: "1GiB"},
		{in: "1.5KiB", want: 1536, str: "1536B"},
		{in: "0", want: 0, str: "0B"},
		{in: "1XB", wantErr: `malformed size "1XB"`},
		{in: "GiB", wantErr: "malformed size"},
		{in: "", wantErr: "malformed size"},
		{in: "-1MiB", wantErr: "must not be negative"},
		{in: "0.5B", wantErr: "not a whole number of bytes"},
		{in: "9000000000GiB", wantErr: "too large"},
	}
	for _, tt := range tests {
		got, err := ParseByteSize(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseByteSize(%q) error = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want || got.String() != tt.str {
			t.Errorf("ParseByteSize(%q) = %d (%q), %v; want %d (%q)", tt.in, got, got.String(), err, tt.want, tt.str)
		}
	}
}

func TestDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"10s", 10 * time.Second, true},
		{"250ms", 250 * time.Millisecond, true},
		{"1h30m", 90 * time.Minute, true},
		{"10", 0, false},
		{"3d", 0, false},
	}
	for _, tt := range tests {
		var d Duration
		err := d.UnmarshalText([]byte(tt.in))
		if (err == nil) != tt.ok || d.D() != tt.want {
			t.Errorf("Duration(%q) = %v, %v; want %v, ok=%v", tt.in, d.D(), err, tt.want, tt.ok)
		}
	}
}

// The bounds themselves are accepted, written as an operator would.
func TestRateBoundsInclusive(t *testing.T) {
	for _, src := range []string{
		"defaults: {rate: 1000000/s, burst: 1000000, min_rate: 0.1/h}\n",
		"defaults: {rate: 60000000/m}\n",
		"hosts: {a.example: {rate: 0.1/h, min_rate: 0.1/h}}\n",
	} {
		if _, err := Parse("c.yaml", []byte(src)); err != nil {
			t.Errorf("%q: %v", src, err)
		}
	}
}
