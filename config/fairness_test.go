package config

import (
	"maps"
	"strings"
	"testing"

	"github.com/hookpace/hookpace/spool"
)

func TestFairnessConfig(t *testing.T) {
	c := mustParse(t, "")
	if f := c.Defaults.Fairness; f.Key != "" || f.PathDepth != 1 || f.Weights != nil || f.MaxQueuedPerKey != 0 {
		t.Fatalf("built-in fairness = %+v, want no key, path_depth 1", f)
	}
	if c.Defaults.Priority.MinShare != 0.1 {
		t.Fatalf("built-in min_share = %g, want 0.1", c.Defaults.Priority.MinShare)
	}
	c = mustParse(t, `
defaults:
  fairness:
    key: header
    weights: {tenant-a: 3, "tenant b": 2}
    max_queued_per_key: 500
  priority:
    min_share: 0.25
hosts:
  inherits.example: {rate: 5/s}
  paths.example:
    fairness: {key: path, path_depth: 2}
  users.example:
    fairness: {key: proxy_user, weights: {}}
  off.example:
    fairness: {key: none}
    priority: {min_share: 0.5}
`)
	d := c.Defaults
	if d.Fairness.Key != FairnessHeader || d.Fairness.MaxQueuedPerKey != 500 ||
		!maps.Equal(d.Fairness.Weights, map[string]int{"tenant-a": 3, "tenant b": 2}) || d.Priority.MinShare != 0.25 {
		t.Fatalf("defaults: %+v %+v", d.Fairness, d.Priority)
	}
	if h := c.Hosts["inherits.example"]; h.Fairness.Key != FairnessHeader || h.Fairness.MaxQueuedPerKey != 500 ||
		h.Fairness.Weights["tenant-a"] != 3 || h.Priority.MinShare != 0.25 {
		t.Errorf("a host without fairness does not inherit the defaults: %+v %+v", h.Fairness, h.Priority)
	}
	if h := c.Hosts["paths.example"].Fairness; h.Key != FairnessPath || h.PathDepth != 2 || h.MaxQueuedPerKey != 500 {
		t.Errorf("paths.example: %+v, want key path, depth 2, the defaults' max_queued_per_key", h)
	}
	if h := c.Hosts["users.example"].Fairness; h.Key != FairnessProxyUser || len(h.Weights) != 0 {
		t.Errorf("users.example: %+v, want key proxy_user, the weights emptied", h)
	}
	if h := c.Hosts["off.example"]; h.Fairness.Key != "" || h.Priority.MinShare != 0.5 {
		t.Errorf("off.example: %+v %+v, want no key, min_share 0.5", h.Fairness, h.Priority)
	}
}

func TestFairnessConfigErrors(t *testing.T) {
	for _, tt := range []struct{ name, yaml, want string }{
		{"key", "defaults:\n  fairness:\n    key: tenant\n", `config.yaml:3: defaults.fairness.key: must be one of`},
		{"depth zero", "defaults:\n  fairness:\n    key: path\n    path_depth: 0\n", "config.yaml:4: defaults.fairness.path_depth: must be between 1 and 32, got 0"},
		{"weight zero", "hosts:\n  a.example:\n    fairness:\n      key: header\n      weights: {a: 0}\n", `config.yaml:5: hosts["a.example"].fairness.weights["a"]: must be between 1 and 1000, got 0`},
		{"weight text", "defaults:\n  fairness:\n    key: header\n    weights:\n      a: lots\n", `config.yaml:5: defaults.fairness.weights["a"]: want an integer, got "lots"`},
		{"weights list", "defaults:\n  fairness:\n    key: header\n    weights: [a]\n", "config.yaml:4: defaults.fairness.weights: want a mapping of fairness keys to weights"},
		{"weight key control", "defaults:\n  fairness:\n    key: header\n    weights: {\"a\\tb\": 2}\n", `config.yaml:4: defaults.fairness.weights["a\tb"]: key has a control character`},
		{"weight key long", "defaults:\n  fairness:\n    key: header\n    weights: {" + strings.Repeat("k", 201) + ": 2}\n", "key is 201 bytes, more than 200"},
		{"weights without key", "defaults:\n  fairness:\n    weights: {a: 2}\n", "config.yaml:3: defaults.fairness.weights: needs a fairness key"},
		{"cap without key", "defaults:\n  fairness:\n    max_queued_per_key: 10\n", "config.yaml:3: defaults.fairness.max_queued_per_key: needs a fairness key"},
		{"cap negative", "defaults:\n  fairness:\n    key: header\n    max_queued_per_key: -1\n", "config.yaml:4: defaults.fairness.max_queued_per_key: must be at least 0, got -1"},
		{"unknown field", "defaults:\n  fairness:\n    key: header\n    keys: 2\n", `config.yaml:4: unknown field "keys" in defaults.fairness`},
		{"not a mapping", "defaults:\n  fairness: header\n", "config.yaml:2: defaults.fairness: want a mapping"},
		{"share one", "defaults:\n  priority:\n    min_share: 1\n", "config.yaml:3: defaults.priority.min_share: must be"},
		{"share zero", "hosts:\n  a.example:\n    priority: {min_share: 0}\n", `config.yaml:3: hosts["a.example"].priority.min_share: must be`},
		{"priority field", "defaults:\n  priority:\n    share: 0.2\n", `config.yaml:3: unknown field "share" in defaults.priority`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("config.yaml", []byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v\nwant an error containing %q", err, tt.want)
			}
		})
	}
}

// The keys weights may name are those the spool's lane-key rule takes
// with MaxLaneKey.
func TestCheckLaneKey(t *testing.T) {
	for _, tt := range []struct {
		key string
		ok  bool
	}{
		{"tenant-a", true}, {"a b/c:d", true}, {"ü", true}, {strings.Repeat("x", 200), true},
		{"", false}, {strings.Repeat("x", 201), false}, {"a\nb", false}, {"a\x7f", false}, {"\x00", false},
	} {
		if err := spool.CheckLaneKey(tt.key, spool.MaxLaneKey); (err == nil) != tt.ok {
			t.Errorf("spool.CheckLaneKey(%q, MaxLaneKey) = %v, want ok %v", tt.key, err, tt.ok)
		}
	}
}
