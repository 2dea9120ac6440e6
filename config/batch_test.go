package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestBatchConfig(t *testing.T) {
	c := mustParse(t, `
defaults:
  batch:
    max_events: 50
hosts:
  envelope.example:
    batch:
      max_events: 500
      max_bytes: 512KiB
      max_wait: 0s
      format: envelope
      headers: [x-event-type]
  alone.example:
    batch: {format: none}
  inherits.example:
    rate: 5/s
`)
	d := c.Defaults.Batch
	if d == nil || d.MaxEvents != 50 || d.MaxBytes != BatchMaxBytes || d.MaxWait.D() != time.Second || d.Format != BatchJSONArray {
		t.Fatalf("defaults.batch = %+v, want max_events 50 and the defaults 1MiB, 1s, json-array", d)
	}
	if c.Hosts["inherits.example"].Batch != d {
		t.Error("a host without batch does not inherit defaults.batch")
	}
	if c.Hosts["alone.example"].Batch != nil {
		t.Error("format none still batches")
	}
	e := c.Hosts["envelope.example"].Batch
	if e.MaxEvents != 500 || e.MaxBytes != 512<<10 || e.MaxWait != 0 || e.Format != BatchEnvelope || !slices.Equal(e.Headers, []string{"X-Event-Type"}) {
		t.Errorf("envelope.example batch = %+v", e)
	}
}

func TestBatchConfigErrors(t *testing.T) {
	for _, tt := range []struct{ name, yaml, want string }{
		{"no max_events", "defaults:\n  batch:\n    max_wait: 1s\n", "config.yaml:3: defaults.batch.max_events: required"},
		{"too many", "defaults:\n  batch:\n    max_events: 501\n", "config.yaml:3: defaults.batch.max_events: must be between 2 and 500, got 501"},
		{"one", "defaults:\n  batch:\n    max_events: 1\n", "config.yaml:3: defaults.batch.max_events: must be between 2 and 500"},
		{"too big", "hosts:\n  a.example:\n    batch:\n      max_events: 10\n      max_bytes: 2MiB\n", `config.yaml:5: hosts["a.example"].batch.max_bytes: must be between`},
		{"negative wait", "defaults:\n  batch:\n    max_events: 10\n    max_wait: -1s\n", "config.yaml:4: defaults.batch.max_wait: must be between"},
		{"long wait", "defaults:\n  batch:\n    max_events: 10\n    max_wait: 2m\n", "config.yaml:4: defaults.batch.max_wait: must be between"},
		{"format", "defaults:\n  batch:\n    max_events: 10\n    format: ndjson\n", "config.yaml:4: defaults.batch.format:"},
		{"headers without envelope", "defaults:\n  batch:\n    max_events: 10\n    headers: [X-A]\n", "config.yaml:4: defaults.batch.headers: only for format envelope"},
		{"bad header", "defaults:\n  batch:\n    max_events: 10\n    format: envelope\n    headers: ['X A']\n", "config.yaml:5: defaults.batch.headers[0]:"},
		{"unknown field", "defaults:\n  batch:\n    max_events: 10\n    max_size: 1\n", `config.yaml:4: unknown field "max_size" in defaults.batch`},
		{"not a mapping", "defaults:\n  batch: 50\n", "config.yaml:2: defaults.batch: want a mapping"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("config.yaml", []byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v\nwant an error containing %q", err, tt.want)
			}
		})
	}
}
