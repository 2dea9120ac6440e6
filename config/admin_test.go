package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestAdminSection(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	os.WriteFile(token, []byte("  0123456789abcdef-token\n"), 0o600)
	for _, tc := range []struct {
		name, yaml, err string
		check           func(*Config) bool
	}{
		{"scalar", "admin: 127.0.0.1:9999\n", "", func(c *Config) bool { return c.Admin == "127.0.0.1:9999" }},
		{"mapping", "admin:\n  listen: \"[::1]:9999\"\n  hosts: [Hookpace.OPS.svc.]\n", "",
			func(c *Config) bool {
				return c.Admin == "[::1]:9999" && slices.Equal(c.AdminAccess.Hosts, []string{"hookpace.ops.svc"})
			}},
		{"mapping without listen keeps the default", "admin: {hosts: [a.example]}\n", "",
			func(c *Config) bool { return c.Admin == "127.0.0.1:9090" }},
		{"unknown field", "admin:\n  listen: 127.0.0.1:1\n  tokenfile: x\n", `t.yaml:3: unknown field "tokenfile" in admin`, nil},
		{"list", "admin: [a]\n", "t.yaml:1: admin: want host:port or a mapping", nil},
		{"bad host", "admin: {hosts: [\"a b\"]}\n", "t.yaml:1: admin.hosts[0]:", nil},
		{"off loopback without token", "admin: 0.0.0.0:9090\n", "t.yaml:1: admin: 0.0.0.0:9090 is not a loopback address: set admin.token_file", nil},
		{"all interfaces without token", "admin:\n  listen: \":9090\"\n", "t.yaml:2: admin: :9090 is not a loopback address", nil},
		{"off loopback, insecure", "admin: {listen: \"0.0.0.0:9090\", insecure_no_auth: true}\n", "",
			func(c *Config) bool { return c.AdminAccess.InsecureNoAuth }},
		{"off loopback with token", "admin: {listen: \"10.0.0.1:9090\", token_file: " + token + "}\n", "",
			func(c *Config) bool { return c.AdminAccess.TokenFile == token }},
		{"same as listen", "listen: 127.0.0.1:1\nadmin: {listen: \"127.0.0.1:1\"}\n", "t.yaml:2: admin: same address as listen", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("t.yaml", []byte(tc.yaml))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(c) {
				t.Errorf("resolved %q / %+v", c.Admin, c.AdminAccess)
			}
		})
	}
}

func TestAdminLoopback(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:9090": true, "127.1.2.3:1": true, "[::1]:9090": true,
		"localhost:9090": true, "0.0.0.0:9090": false, ":9090": false, "[::]:1": false, "10.0.0.1:1": false, "host.example:1": false} {
		if got := AdminLoopback(addr); got != want {
			t.Errorf("AdminLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
