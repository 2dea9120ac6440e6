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
