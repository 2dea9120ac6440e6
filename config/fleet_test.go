package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFleetDefaultOff(t *testing.T) {
	c := mustParse(t, "listen: 127.0.0.1:8080\n")
	if c.Fleet.Enabled() {
		t.Fatalf("fleet enabled without a fleet section: %+v", c.Fleet)
	}
}

func TestFleetParse(t *testing.T) {
	t.Setenv("HOOKPACE_TEST_REDIS_PW", "s3cret")
	c := mustParse(t, `
fleet:
  redis: rediss://redis.internal:6380/2
  redis_password_env: HOOKPACE_TEST_REDIS_PW
  key_prefix: payments
  replica: gw-1
  timeout: 100ms
  lease_period: 5s
`)
	f := c.Fleet
	if !f.Enabled() || f.Redis != "rediss://redis.internal:6380/2" ||
		f.KeyPrefix != "payments" || f.Replica != "gw-1" || f.Timeout.D() != 100*time.Millisecond ||
		f.LeasePeriod.D() != 5*time.Second {
		t.Fatalf("fleet = %+v", f)
	}

	c = mustParse(t, "fleet:\n  redis: redis://:inurl@127.0.0.1:6379\n")
	if strings.Contains(c.Fleet.RedactedURL(), "inurl") {
		t.Fatalf("redacted %q", c.Fleet.RedactedURL())
	}
}

func TestFleetErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"fleet:\n  redis: http://x:6379\n", "config.yaml:2: fleet.redis: want a redis:// or rediss:// URL"},
		{"fleet:\n  redis: redis://\n", "config.yaml:2: fleet.redis: no host"},
		{"fleet:\n  redis: redis://h/x\n", `config.yaml:2: fleet.redis: database "x" is not a number`},
		{"fleet:\n  key_prefix: a\n", "config.yaml:2: fleet.redis: required in a fleet section"},
		{"fleet:\n  redis: redis://h\n  key_prefix: a{b}\n", "config.yaml:3: fleet.key_prefix: \"a{b}\": no braces"},
		{"fleet:\n  redis: redis://h\n  timeout: 5s\n  lease_period: 6s\n", "config.yaml:3: fleet.timeout: 5s must be under a third of lease_period"},
		{"fleet:\n  redis: redis://h\n  lease_period: 10ms\n", "config.yaml:3: fleet.lease_period: must be between 1s and 1h0m0s"},
		{"fleet:\n  redis: redis://:pw@h\n  redis_password_file: /etc/pw\n", "config.yaml:3: fleet.redis_password_env: give the Redis password in one place"},
		{"fleet:\n  redis: redis://h\n  lease: 1s\n", "config.yaml:3"},
	} {
		_, err := Parse("config.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

func TestFleetClusterAndSentinel(t *testing.T) {
	c := mustParse(t, "fleet:\n  cluster: [10.0.0.1:7000, 'redis-b:7001']\n  tls: true\n  redis_password_file: /run/pw\n")
	f := c.Fleet
	if !f.Enabled() || !slices.Equal(f.Cluster, []string{"10.0.0.1:7000", "redis-b:7001"}) || !f.TLS ||
		f.PasswordFile != "/run/pw" || f.RedactedURL() != "cluster 10.0.0.1:7000,redis-b:7001" {
		t.Fatalf("fleet = %+v", f)
	}
	c = mustParse(t, "fleet:\n  sentinel:\n    master: mymaster\n    addrs: [s1:26379, s2:26379]\n")
	f = c.Fleet
	if !f.Enabled() || f.SentinelMaster != "mymaster" || !slices.Equal(f.SentinelAddrs, []string{"s1:26379", "s2:26379"}) || f.TLS {
		t.Fatalf("fleet = %+v", f)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"fleet:\n  redis: redis://h\n  cluster: [a:1]\n", "config.yaml:3: fleet.cluster: give one of fleet.redis, fleet.cluster or fleet.sentinel, not fleet.redis as well"},
		{"fleet:\n  cluster: [a:1]\n  sentinel:\n    master: m\n    addrs: [b:2]\n", "config.yaml:4: fleet.sentinel: give one of"},
		{"fleet:\n  cluster: []\n", "config.yaml:2: fleet.cluster: must not be empty"},
		{"fleet:\n  cluster:\n    - a:1\n    - nocolon\n", `config.yaml:4: fleet.cluster[1]: want host:port, got "nocolon"`},
		{"fleet:\n  cluster: [a:x]\n", `config.yaml:2: fleet.cluster[0]: port "x" is not a number`},
		{"fleet:\n  sentinel:\n    addrs: [b:2]\n", "config.yaml:3: fleet.sentinel.master: required with fleet.sentinel.addrs"},
		{"fleet:\n  sentinel:\n    master: m\n", "config.yaml:3: fleet.sentinel.addrs: required with fleet.sentinel.master"},
		{"fleet:\n  sentinel:\n    master: m\n    addr: [b:2]\n", "config.yaml:4"},
		{"fleet:\n  redis: redis://h\n  tls: true\n", "config.yaml:3: fleet.tls: with fleet.redis, say rediss://"},
		{"fleet:\n  tls: true\n", "config.yaml:2: fleet.redis: required in a fleet section (or fleet.cluster, or fleet.sentinel)"},
		{"fleet:\n  cluster: [a:1]\n  tls: yes please\n", "config.yaml:3: fleet.tls:"},
	} {
		_, err := Parse("config.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
	old := mustParse(t, "fleet:\n  cluster: [a:1]\n")
	nw := mustParse(t, "fleet:\n  cluster: [a:1, b:2]\n  tls: true\n")
	if got := RestartRequired(old, nw); !slices.Equal(got, []string{"fleet.cluster", "fleet.tls"}) {
		t.Fatalf("RestartRequired = %v", got)
	}
}

func TestFleetRestartRequired(t *testing.T) {
	old := mustParse(t, "fleet:\n  redis: redis://a:6379\n")
	nw := mustParse(t, "fleet:\n  redis: redis://b:6379\n  key_prefix: x\n")
	got := RestartRequired(old, nw)
	if !slices.Equal(got, []string{"fleet.redis", "fleet.key_prefix"}) {
		t.Fatalf("RestartRequired = %v", got)
	}
	if got := RestartRequired(old, mustParse(t, "fleet:\n  redis: redis://a:6379\n")); len(got) != 0 {
		t.Fatalf("unchanged: %v", got)
	}
}
