package config

import (
	"strings"
	"testing"
	"time"
)

func TestShutdownParse(t *testing.T) {
	c := mustParse(t, "shutdown:\n  timeout: 10s\n  drain: 3s\n  handoff: http://app:s3cret@gateway.hookpace.svc:8080\n")
	want := ShutdownConfig{Timeout: Duration(10 * time.Second), Drain: Duration(3 * time.Second),
		Handoff: "http://app:s3cret@gateway.hookpace.svc:8080"}
	if c.Shutdown != want {
		t.Errorf("Shutdown = %+v, want %+v", c.Shutdown, want)
	}
	c = mustParse(t, "shutdown:\n  handoff: http://gw:8080/\n  handoff_auth_file: /etc/hookpace-handoff/credentials\n")
	if c.Shutdown.HandoffAuth != "/etc/hookpace-handoff/credentials" || c.Shutdown.Drain != 0 {
		t.Errorf("Shutdown = %+v, want no drain by default with a hand-off", c.Shutdown)
	}
	// Without a hand-off, a drain left unset leaves DrainRoom of the
	// timeout, or is 0.
	for timeout, drain := range map[string]time.Duration{"60s": 50 * time.Second, "12s": 2 * time.Second, "10s": 0, "3s": 0} {
		c := mustParse(t, "shutdown:\n  timeout: "+timeout+"\n")
		if c.Shutdown.Drain != Duration(drain) {
			t.Errorf("timeout %s: default drain %s, want %s", timeout, c.Shutdown.Drain, drain)
		}
	}
	if d := Default().Shutdown; d.Drain != d.Timeout-Duration(DrainRoom) {
		t.Errorf("embedded defaults: %+v, want a drain of the timeout less %s", d, DrainRoom)
	}
	if c := mustParse(t, "shutdown:\n  drain: 0s\n"); c.Shutdown.Drain != 0 {
		t.Errorf("drain: 0s gave %s", c.Shutdown.Drain)
	}
	// Without handoff a drain may take the whole timeout.
	mustParse(t, "shutdown:\n  timeout: 5s\n  drain: 5s\n")
}

func TestShutdownErrors(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"drain leaves no room for the hand-off", "shutdown:\n  timeout: 10s\n  drain: 8s\n  handoff: http://gw:8080\n",
			`config.yaml:3: shutdown.drain: 8s leaves 2s of shutdown.timeout (10s) for the hand-off; it needs at least 5s`},
		{"drain past the default timeout", "shutdown:\n  drain: 40s\n  handoff: http://gw:8080\n",
			`config.yaml:2: shutdown.drain: 40s leaves 0s of shutdown.timeout (30s)`},
		{"drain longer than timeout", "shutdown:\n  timeout: 5s\n  drain: 6s\n",
			`config.yaml:3: shutdown.drain: 6s is longer than shutdown.timeout (5s)`},
		{"negative drain", "shutdown:\n  drain: -1s\n", `config.yaml:2: shutdown.drain: must not be negative`},
		{"https handoff", "shutdown:\n  handoff: https://gw:8443\n", `config.yaml:2: shutdown.handoff: want http://host:port of a hookpace proxy listener, got scheme "https"`},
		{"handoff with a path", "shutdown:\n  handoff: http://gw:8080/hooks\n", `config.yaml:2: shutdown.handoff: want http://host:port without a path`},
		{"handoff with a path and a password", "shutdown:\n  handoff: http://a:s3cret@gw:8080/hooks\n", `"http://a:xxxxx@gw:8080/hooks"`},
		{"handoff without host", "shutdown:\n  handoff: http://:8080\n", `config.yaml:2: shutdown.handoff: no host`},
		{"handoff without password", "shutdown:\n  handoff: http://app@gw:8080\n", `config.yaml:2: shutdown.handoff: credentials in "http://app@gw:8080": want user:password@`},
		{"auth file without handoff", "shutdown:\n  handoff_auth_file: /x\n", `config.yaml:2: shutdown.handoff_auth_file: set without shutdown.handoff`},
		{"auth file and userinfo", "shutdown:\n  handoff: http://a:b@gw:8080\n  handoff_auth_file: /x\n",
			`config.yaml:3: shutdown.handoff_auth_file: set as well as credentials in shutdown.handoff`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("config.yaml", []byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v\nwant it to contain %s", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
}
