package config

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FleetConfig shares per-host limits with other replicas through Redis:
// one server (Redis), a Redis Cluster (Cluster, its seed nodes) or a
// Sentinel-managed master (SentinelMaster and SentinelAddrs), exactly one.
// Without a fleet section each replica paces alone.
type FleetConfig struct {
	Redis          string   // redis:// or rediss:// URL
	Cluster        []string // host:port of a Redis Cluster's seed nodes
	SentinelMaster string   // the master's name at the sentinels
	SentinelAddrs  []string // host:port of the sentinels
	TLS            bool     // TLS to the cluster's nodes or the sentinels and master (a URL says rediss://)
	PasswordEnv    string   // environment variable holding the Redis password
	PasswordFile   string   // file holding the Redis password
	KeyPrefix      string   // prefix of every key, so that fleets can share one Redis
	Replica        string   // this replica's name; "" = hostname:pid
	Timeout        Duration // per Redis operation
	LeasePeriod    Duration // a concurrency slot of a dead replica is free after this
}

// Enabled reports whether fleet mode is configured.
func (f FleetConfig) Enabled() bool {
	return f.Redis != "" || len(f.Cluster) > 0 || f.SentinelMaster != ""
}

// RedactedURL is Redis with any password hidden, or the cluster's seeds,
// or the sentinels and master, for logs.
func (f FleetConfig) RedactedURL() string {
	switch {
	case len(f.Cluster) > 0:
		return "cluster " + strings.Join(f.Cluster, ",")
	case f.SentinelMaster != "":
		return "sentinel " + f.SentinelMaster + "@" + strings.Join(f.SentinelAddrs, ",")
	}
	u, err := url.Parse(f.Redis)
	if err != nil {
		return "(unparsable)"
	}
	return u.Redacted()
}

type rawFleet struct {
	Redis             opt[string]        `yaml:"redis"`
	Cluster           opt[[]opt[string]] `yaml:"cluster"`
	Sentinel          rawSentinel        `yaml:"sentinel"`
	TLS               opt[bool]          `yaml:"tls"`
	RedisPasswordEnv  opt[string]        `yaml:"redis_password_env"`
	RedisPasswordFile opt[string]        `yaml:"redis_password_file"`
	KeyPrefix         opt[string]        `yaml:"key_prefix"`
	Replica           opt[string]        `yaml:"replica"`
	Timeout           opt[Duration]      `yaml:"timeout"`
	LeasePeriod       opt[Duration]      `yaml:"lease_period"`
}

type rawSentinel struct {
	Master opt[string]        `yaml:"master"`
	Addrs  opt[[]opt[string]] `yaml:"addrs"`
}

func defaultFleet() FleetConfig {
	return FleetConfig{KeyPrefix: "hookpace", Timeout: Duration(250 * time.Millisecond),
		LeasePeriod: Duration(10 * time.Second)}
}

func resolveFleet(p *problems, r *rawFleet, f *FleetConfig) {
	field(p, "fleet.redis", r.Redis, &f.Redis, checkRedisURL)
	list(p, "fleet.cluster", r.Cluster, &f.Cluster, checkHostPort, true)
	field(p, "fleet.sentinel.master", r.Sentinel.Master, &f.SentinelMaster, nonEmpty)
	list(p, "fleet.sentinel.addrs", r.Sentinel.Addrs, &f.SentinelAddrs, checkHostPort, true)
	field(p, "fleet.tls", r.TLS, &f.TLS, nil)
	field(p, "fleet.redis_password_env", r.RedisPasswordEnv, &f.PasswordEnv, nonEmpty)
	field(p, "fleet.redis_password_file", r.RedisPasswordFile, &f.PasswordFile, nonEmpty)
	field(p, "fleet.key_prefix", r.KeyPrefix, &f.KeyPrefix, checkKeyPrefix)
	field(p, "fleet.replica", r.Replica, &f.Replica, checkKeyPrefix)
	field(p, "fleet.timeout", r.Timeout, &f.Timeout, durationWithin(time.Millisecond, time.Minute))
	field(p, "fleet.lease_period", r.LeasePeriod, &f.LeasePeriod, durationWithin(time.Second, time.Hour))
	if !resolveFleetTopology(p, r, f) {
		return
	}
	set := r.Redis.Set || r.Redis.Err != nil || r.RedisPasswordEnv.Set || r.RedisPasswordFile.Set || r.KeyPrefix.Set ||
		r.Replica.Set || r.Timeout.Set || r.LeasePeriod.Set || r.TLS.Set
	if !f.Enabled() {
		if set && !r.Redis.Set && r.Redis.Err == nil {
			p.add(firstLine(r.KeyPrefix.Line, r.Replica.Line, r.Timeout.Line, r.LeasePeriod.Line,
				r.RedisPasswordEnv.Line, r.RedisPasswordFile.Line, r.TLS.Line), "fleet.redis",
				"required in a fleet section (or fleet.cluster, or fleet.sentinel)")
		}
		return
	}
	if f.Timeout >= f.LeasePeriod/3 {
		p.add(firstLine(r.Timeout.Line, r.LeasePeriod.Line), "fleet.timeout",
			"%v must be under a third of lease_period (%v): leases are renewed every third", f.Timeout, f.LeasePeriod)
	}
	resolveFleetPassword(p, r, f)
}

// resolveFleetTopology checks that the section names one Redis, one
// Cluster or one Sentinel-managed master, and that tls goes with the last
// two; false when it found a problem.
func resolveFleetTopology(p *problems, r *rawFleet, f *FleetConfig) bool {
	var named []string
	var lines []int
	if r.Redis.Set || r.Redis.Err != nil {
		named, lines = append(named, "fleet.redis"), append(lines, r.Redis.Line)
	}
	if r.Cluster.Set || r.Cluster.Err != nil {
		named, lines = append(named, "fleet.cluster"), append(lines, r.Cluster.Line)
	}
	sentinel := r.Sentinel.Master.Set || r.Sentinel.Master.Err != nil || r.Sentinel.Addrs.Set || r.Sentinel.Addrs.Err != nil
	if sentinel {
		named, lines = append(named, "fleet.sentinel"), append(lines, firstLine(r.Sentinel.Master.Line, r.Sentinel.Addrs.Line))
	}
	if len(named) > 1 {
		p.add(lines[1], named[1], "give one of fleet.redis, fleet.cluster or fleet.sentinel, not %s as well", named[0])
		return false
	}
	if sentinel && !r.Sentinel.Master.Set && r.Sentinel.Master.Err == nil {
		p.add(r.Sentinel.Addrs.Line, "fleet.sentinel.master", "required with fleet.sentinel.addrs")
		return false
	}
	if sentinel && !r.Sentinel.Addrs.Set && r.Sentinel.Addrs.Err == nil {
		p.add(r.Sentinel.Master.Line, "fleet.sentinel.addrs", "required with fleet.sentinel.master")
		return false
	}
	if f.TLS && f.Redis != "" {
		p.add(r.TLS.Line, "fleet.tls", "with fleet.redis, say rediss:// in the URL instead")
		return false
	}
	return true
}

func resolveFleetPassword(p *problems, r *rawFleet, f *FleetConfig) {
	var inURL string
	if f.Redis != "" {
		u, _ := url.Parse(f.Redis)
		inURL, _ = u.User.Password()
	}
	sources := 0
	for _, s := range []string{inURL, f.PasswordEnv, f.PasswordFile} {
		if s != "" {
			sources++
		}
	}
	if sources > 1 {
		p.add(firstLine(r.RedisPasswordEnv.Line, r.RedisPasswordFile.Line), "fleet.redis_password_env",
			"give the Redis password in one place: the URL, redis_password_env or redis_password_file")
	}
}

func checkRedisURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("malformed URL: %v", err)
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return fmt.Errorf("want a redis:// or rediss:// URL, got %q", u.Scheme+"://")
	}
	if u.Host == "" {
		return fmt.Errorf("no host in %q", u.Redacted())
	}
	if db := strings.Trim(u.Path, "/"); db != "" && strings.Trim(db, "0123456789") != "" {
		return fmt.Errorf("database %q is not a number", db)
	}
	return nil
}

func checkHostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("want host:port, got %q", s)
	}
	if host == "" {
		return fmt.Errorf("no host in %q", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 1 to 65535", port)
	}
	return nil
}

func checkKeyPrefix(s string) error {
	if s == "" {
		return fmt.Errorf("must not be empty")
	}
	if strings.ContainsAny(s, "{} \t\r\n") {
		return fmt.Errorf("%q: no braces or spaces (they would break the key's hash tag)", s)
	}
	return nil
}

// fleetRestart lists the fleet settings that differ: all need a restart.
func fleetRestart(old, new FleetConfig) []string {
	var changed []string
	add := func(name string, differ bool) {
		if differ {
			changed = append(changed, "fleet."+name)
		}
	}
	add("redis", old.Redis != new.Redis)
	add("cluster", !slices.Equal(old.Cluster, new.Cluster))
	add("sentinel.master", old.SentinelMaster != new.SentinelMaster)
	add("sentinel.addrs", !slices.Equal(old.SentinelAddrs, new.SentinelAddrs))
	add("tls", old.TLS != new.TLS)
	add("redis_password_env", old.PasswordEnv != new.PasswordEnv)
	add("redis_password_file", old.PasswordFile != new.PasswordFile)
	add("key_prefix", old.KeyPrefix != new.KeyPrefix)
	add("replica", old.Replica != new.Replica)
	add("timeout", old.Timeout != new.Timeout)
	add("lease_period", old.LeasePeriod != new.LeasePeriod)
	return changed
}

func durationWithin(lo, hi time.Duration) func(Duration) error {
	return func(d Duration) error {
		if d.D() < lo || d.D() > hi {
			return fmt.Errorf("must be between %v and %v, got %v", lo, hi, d)
		}
		return nil
	}
}
