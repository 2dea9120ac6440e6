package config

import (
	"strings"
	"testing"
)

func TestCaptureListen(t *testing.T) {
	c, err := Parse("config.yaml", []byte("capture:\n  listen: 127.0.0.1:15001\n"))
	if err != nil || c.Capture.Listen != "127.0.0.1:15001" {
		t.Fatalf("capture.listen: %+v, %v", c.Capture, err)
	}
	if c, err := Parse("config.yaml", []byte("listen: 127.0.0.1:8080\n")); err != nil || c.Capture.Listen != "" {
		t.Fatalf("capture off by default: %+v, %v", c.Capture, err)
	}
	_, err = Parse("config.yaml", []byte("listen: 127.0.0.1:8080\ncapture:\n  listen: nowhere\n"))
	if err == nil || !strings.Contains(err.Error(), "config.yaml:3: capture.listen:") {
		t.Fatalf("bad capture.listen: %v, want the field and line named", err)
	}
	old, _ := Parse("config.yaml", []byte("capture:\n  listen: 127.0.0.1:15001\n"))
	off, _ := Parse("config.yaml", []byte("listen: 127.0.0.1:8080\n"))
	if got := RestartRequired(old, off); len(got) != 1 || got[0] != "capture.listen" {
		t.Errorf("RestartRequired: %v, want capture.listen", got)
	}
}
