package config

import (
	"strings"
	"testing"
	"time"
)

func TestJournalConfig(t *testing.T) {
	c := mustParse(t, "")
	if c.Journal.Off || c.Journal.Bodies || c.Journal.Retain.D() != 14*24*time.Hour || c.Journal.MaxBytes != 0 || c.Journal.ResponseBody != 1<<10 {
		t.Fatalf("defaults: %+v", c.Journal)
	}
	c = mustParse(t, "journal:\n  retain: 48h\n  max_bytes: 64MiB\n  response_body: 4KiB\n  bodies: true\n")
	if c.Journal.Retain.D() != 48*time.Hour || c.Journal.MaxBytes != 64<<20 || c.Journal.ResponseBody != 4<<10 || !c.Journal.Bodies {
		t.Fatalf("set: %+v", c.Journal)
	}
	for _, bad := range []struct{ yaml, field string }{
		{"journal:\n  retain: 10s\n", "journal.retain"},
		{"journal:\n  response_body: 1MiB\n", "journal.response_body"},
		{"journal:\n  bodies: yes please\n", "journal.bodies"},
	} {
		_, err := Parse("test.yaml", []byte(bad.yaml))
		if err == nil || !strings.Contains(err.Error(), bad.field) {
			t.Errorf("%q: %v; want an error naming %s", bad.yaml, err, bad.field)
		}
	}
}

func TestJournalRedactPaths(t *testing.T) {
	c := mustParse(t, "journal:\n  redact_paths:\n    - in.example.com/t/*\n    - \"*.hooks.example\"\n")
	if got := strings.Join(c.Journal.RedactPaths, " "); got != "in.example.com/t/* *.hooks.example" {
		t.Fatalf("redact_paths %q", got)
	}
	_, err := Parse("test.yaml", []byte("journal:\n  retain: 48h\n  redact_paths:\n    - ok.example/x\n    - https://bad.example/x\n"))
	if err == nil || !strings.Contains(err.Error(), "journal.redact_paths[1]") || !strings.Contains(err.Error(), "test.yaml:5:") {
		t.Errorf("a pattern with a scheme: %v; want an error naming journal.redact_paths[1] at line 5", err)
	}
	old := mustParse(t, "journal:\n  redact_paths: [a.example]\n")
	if got := RestartRequired(old, mustParse(t, "journal:\n  redact_paths: [b.example]\n")); len(got) != 0 {
		t.Errorf("a redact_paths change needs a restart: %v", got)
	}
	if got := RestartRequired(old, mustParse(t, "journal:\n  retain: 48h\n  redact_paths: [a.example]\n")); len(got) != 1 || got[0] != "journal" {
		t.Errorf("a retain change: %v, want [journal]", got)
	}
}
