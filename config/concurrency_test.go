package config

import (
	"strings"
	"testing"
)

func TestConcurrencyAuto(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		auto       bool
		cap        int
		text       string
	}{
		{"default", "hosts:\n  a.example: {}\n", false, 4, "4"},
		{"fixed", "hosts:\n  a.example: {concurrency: 8}\n", false, 8, "8"},
		{"auto", "hosts:\n  a.example: {concurrency: auto}\n", true, DefaultMaxConcurrency, "auto (max 64)"},
		{"auto with a ceiling", "hosts:\n  a.example: {concurrency: auto, max_concurrency: 16}\n", true, 16, "auto (max 16)"},
		{"auto from defaults", "defaults: {concurrency: auto, max_concurrency: 10}\nhosts:\n  a.example: {}\n", true, 10, "auto (max 10)"},
		{"fixed over auto defaults", "defaults: {concurrency: auto}\nhosts:\n  a.example: {concurrency: 3}\n", false, 3, "3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("config.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			_, h := c.Lookup("a.example")
			if h.AutoConcurrency != tc.auto || h.ConcurrencyCap() != tc.cap || h.ConcurrencyText() != tc.text {
				t.Errorf("auto %v cap %d text %q, want %v %d %q", h.AutoConcurrency, h.ConcurrencyCap(), h.ConcurrencyText(), tc.auto, tc.cap, tc.text)
			}
		})
	}
}

func TestConcurrencyErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"hosts:\n  a.example: {concurrency: lots}\n", `config.yaml:2: hosts["a.example"].concurrency: want an integer or auto, got "lots"`},
		{"hosts:\n  a.example: {concurrency: 0}\n", `config.yaml:2: hosts["a.example"].concurrency: must be at least 1, got 0`},
		{"defaults:\n  max_concurrency: 0\n", `config.yaml:2: defaults.max_concurrency: must be at least 1, got 0`},
	} {
		_, err := Parse("config.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
