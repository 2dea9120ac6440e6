package config

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// FleetConfig shares per-host limits with other replicas through Redis.
// Without a fleet section (Redis empty) each replica paces alone.
type FleetConfig struct {
	Redis        string   // redis:// or rediss:// URL
	PasswordEnv  string   // environment variable holding the Redis password
	PasswordFile string   // file holding the Redis password
	KeyPrefix    string   // prefix of every key, so that fleets can share one Redis
	Replica      string   // this replica's name; "" = hostname:pid
	Timeout      Duration // per Redis operation
	LeasePeriod  Duration // a concurrency slot of a dead replica is free after this
}

// Enabled reports whether fleet mode is configured.
func (f FleetConfig) Enabled() bool { return f.Redis != "" }

// RedactedURL is Redis with any password hidden, for logs.
func (f FleetConfig) RedactedURL() string {
	u, err := url.Parse(f.Redis)
	if err != nil {
		return "(unparsable)"
	}
	return u.Redacted()
}

type rawFleet struct {
	Redis             opt[string]   `yaml:"redis"`
	RedisPasswordEnv  opt[string]   `yaml:"redis_password_env"`
	RedisPasswordFile opt[string]   `yaml:"redis_password_file"`
	KeyPrefix         opt[string]   `yaml:"key_prefix"`
	Replica           opt[string]   `yaml:"replica"`
	Timeout           opt[Duration] `yaml:"timeout"`
	LeasePeriod       opt[Duration] `yaml:"lease_period"`
}

func defaultFleet() FleetConfig {
	return FleetConfig{KeyPrefix: "hookpace", Timeout: Duration(250 * time.Millisecond),
		LeasePeriod: Duration(10 * time.Second)}
}

func resolveFleet(p *problems, r *rawFleet, f *FleetConfig) {
	field(p, "fleet.redis", r.Redis, &f.Redis, checkRedisURL)
	field(p, "fleet.redis_password_env", r.RedisPasswordEnv, &f.PasswordEnv, nonEmpty)
	field(p, "fleet.redis_password_file", r.RedisPasswordFile, &f.PasswordFile, nonEmpty)
	field(p, "fleet.key_prefix", r.KeyPrefix, &f.KeyPrefix, checkKeyPrefix)
	field(p, "fleet.replica", r.Replica, &f.Replica, checkKeyPrefix)
	field(p, "fleet.timeout", r.Timeout, &f.Timeout, durationWithin(time.Millisecond, time.Minute))
	field(p, "fleet.lease_period", r.LeasePeriod, &f.LeasePeriod, durationWithin(time.Second, time.Hour))
	set := r.Redis.Set || r.Redis.Err != nil || r.RedisPasswordEnv.Set || r.RedisPasswordFile.Set || r.KeyPrefix.Set ||
		r.Replica.Set || r.Timeout.Set || r.LeasePeriod.Set
	if f.Redis == "" {
		if set && !r.Redis.Set && r.Redis.Err == nil {
			p.add(firstLine(r.KeyPrefix.Line, r.Replica.Line, r.Timeout.Line, r.LeasePeriod.Line,
				r.RedisPasswordEnv.Line, r.RedisPasswordFile.Line), "fleet.redis", "required in a fleet section")
		}
		return
	}
	if f.Timeout >= f.LeasePeriod/3 {
		p.add(firstLine(r.Timeout.Line, r.LeasePeriod.Line), "fleet.timeout",
			"%v must be under a third of lease_period (%v): leases are renewed every third", f.Timeout, f.LeasePeriod)
	}
	resolveFleetPassword(p, r, f)
}

func resolveFleetPassword(p *problems, r *rawFleet, f *FleetConfig) {
	u, _ := url.Parse(f.Redis)
	inURL, _ := u.User.Password()
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
