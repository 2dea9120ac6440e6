package config

import (
	"fmt"
	"strings"

	"github.com/hookpace/hookpace/pacer"
	"github.com/hookpace/hookpace/spool"
)

// MaxBody is the largest spool.max_body: what the spool can store
// (spool.MaxRecordSize), less 1 MiB for the headers and the URL (Go's
// default limit on a request's header). A webhook whose whole record is
// still too large gets 413 from the proxy.
const MaxBody = 30 << 20

// resolve overlays raw on Default(), validating each value as it goes and
// recording every problem in p.
func resolve(raw *rawConfig, doc *docIndex, p *problems) *Config {
	c := Default()

	field(p, "listen", raw.Listen, &c.Listen, checkListen)
	ra := decodeAdmin(&raw.Admin, doc, p)
	resolveAdmin(p, ra, c)
	if c.Listen == c.Admin && !strings.HasSuffix(c.Admin, ":0") {
		p.add(firstLine(ra.Listen.Line, raw.Listen.Line), "admin", "same address as listen (%s)", c.Listen)
	}

	field(p, "log.format", raw.Log.Format, &c.Log.Format, oneOf("text", "json"))
	field(p, "log.level", raw.Log.Level, &c.Log.Level, oneOf("debug", "info", "warn", "error"))

	resolveSpool(p, &raw.Spool, &c.Spool)

	resolveMITM(p, &raw.MITM, c)

	field(p, "tls.ca_file", raw.TLS.CAFile, &c.TLS.CAFile, nil)
	list(p, "egress.allow", raw.Egress.Allow, &c.Egress.Allow, checkEgressEntry, false)
	list(p, "egress.deny", raw.Egress.Deny, &c.Egress.Deny, checkEgressEntry, false)
	for _, l := range []*[]string{&c.Egress.Allow, &c.Egress.Deny} {
		for i := range *l {
			(*l)[i] = strings.ToLower(strings.TrimSpace((*l)[i]))
		}
		if len(*l) == 0 {
			*l = nil // `allow: []` means the same as no allow list
		}
	}

	c.Auth.Users = resolveUsers(p, doc, raw.Auth.Users)

	t, tr := &raw.Telemetry, &raw.Telemetry.Traces
	field(p, "telemetry.max_host_labels", t.MaxHostLabels, &c.Telemetry.MaxHostLabels, atLeast(1))
	field(p, "telemetry.metrics_otlp_endpoint", t.MetricsOTLPEndpoint, &c.Telemetry.MetricsOTLPEndpoint, nil)
	field(p, "telemetry.traces.exporter", tr.Exporter, &c.Telemetry.Traces.Exporter, oneOf("none", "otlp", "stdout"))
	field(p, "telemetry.traces.endpoint", tr.Endpoint, &c.Telemetry.Traces.Endpoint, nil)
	field(p, "telemetry.traces.sample_ratio", tr.SampleRatio, &c.Telemetry.Traces.SampleRatio, within(0, 1, true, true))
	if c.Telemetry.Traces.Exporter == "otlp" && c.Telemetry.Traces.Endpoint == "" {
		p.add(firstLine(tr.Endpoint.Line, tr.Exporter.Line), "telemetry.traces.endpoint", "required when exporter is otlp")
	}

	resolveShutdown(p, &raw.Shutdown, &c.Shutdown)
	resolveFleet(p, &raw.Fleet, &c.Fleet)
	resolveDelivery(p, &raw.Delivery, &c.Delivery)
	resolveDedupe(p, &raw.Dedupe, &c.Dedupe)
	resolveJournal(p, &raw.Journal, &c.Journal)
	resolveProxy(p, &raw.Proxy, &c.Proxy)
	resolveMemory(p, &raw.Memory, &c.Memory)
	resolveCapture(p, &raw.Capture, &c.Capture)

	// CONNECT: an operator's CA intercepts everything, as before; without
	// one, a host named in hosts is intercepted by hookpace's own CA and
	// any other host's tunnel passes through (counted), unless defaults
	// says otherwise.
	base := defaultHost()
	if c.MITM.Enabled() {
		base.Connect = ConnectMITM
	}
	var minExplicit bool
	c.Defaults, minExplicit = resolveHost(p, "defaults", &raw.Defaults, base, false, false)
	entries := decodeHosts(&raw.Hosts, doc, p)
	c.Hosts = resolveHosts(p, entries, c.Defaults, minExplicit, !raw.Defaults.Connect.Set)
	resolveScope(p, &raw.MITM, c)
	resolveWebhooks(p, doc, raw.Webhooks, raw.Webhooks != nil, c)
	c.hosts = newHostIndex(c.Hosts)
	resolveEvents(p, &raw.Events, c)
	resolveInbound(p, &raw.Inbound, c)
	c.lines = make(map[string]int)
	for path, line := range doc.lines {
		if !strings.HasPrefix(path, "hosts[") {
			c.lines[path] = line
		}
	}
	return c
}

// resolveMITM resolves the mitm block: an operator's CA (both files or
// neither) and what hookpace's own CA may intercept.
func resolveMITM(p *problems, m *rawMITM, c *Config) {
	field(p, "mitm.ca_cert", m.CACert, &c.MITM.CACert, nil)
	field(p, "mitm.ca_key", m.CAKey, &c.MITM.CAKey, nil)
	field(p, "mitm.cache_size", m.CacheSize, &c.MITM.CacheSize, atLeast(1))
	list(p, "mitm.hosts", m.Hosts, &c.MITM.Hosts, checkMITMHost, false)
	if m.Hosts.Set && c.MITM.Hosts == nil {
		c.MITM.Hosts = []string{} // `hosts: []`: intercept nothing
	}
	field(p, "mitm.public_dir", m.PublicDir, &c.MITM.PublicDir, nonEmpty)
	switch {
	case c.MITM.CACert != "" && c.MITM.CAKey == "":
		p.add(m.CACert.Line, "mitm.ca_key", "required when mitm.ca_cert is set")
	case c.MITM.CACert == "" && c.MITM.CAKey != "":
		p.add(m.CAKey.Line, "mitm.ca_cert", "required when mitm.ca_key is set")
	}
}

// resolveScope settles what hookpace's own CA vouches for. Unset, it is
// open exactly when the operator asked to intercept every host
// (defaults.connect: mitm) and named no mitm.hosts; listed otherwise, so
// that a config naming its partners keeps a CA for them alone.
func resolveScope(p *problems, m *rawMITM, c *Config) {
	field(p, "mitm.scope", m.Scope, &c.MITM.Scope, oneOf(ScopeOpen, ScopeListed))
	list(p, "mitm.exclude", m.Exclude, &c.MITM.Exclude, checkExclude, false)
	switch {
	case !m.Scope.Set && c.Defaults.Connect == ConnectMITM && c.MITM.Hosts == nil:
		c.MITM.Scope = ScopeOpen
	case !m.Scope.Set:
		c.MITM.Scope = ScopeListed
	case c.MITM.Scope == ScopeOpen && c.MITM.Hosts != nil:
		p.add(m.Scope.Line, "mitm.scope", "open: the CA vouches for any name; mitm.hosts lists names for a listed CA: set one or the other")
	case c.MITM.Scope == ScopeOpen && c.MITM.Enabled():
		p.add(m.Scope.Line, "mitm.scope", "open applies to hookpace's own CA; with mitm.ca_cert your CA's own constraints decide")
	}
	if m.Exclude.Set && len(c.MITM.Exclude) > 0 && c.MITM.Scope != ScopeOpen {
		p.add(m.Exclude.Line, "mitm.exclude", "applies to the open-world CA (mitm.scope: open) only")
	}
}

func resolveSpool(p *problems, r *rawSpool, s *SpoolConfig) {
	field(p, "spool.dir", r.Dir, &s.Dir, nonEmpty)
	field(p, "spool.max_messages", r.MaxMessages, &s.MaxMessages, atLeast[int64](1))
	field(p, "spool.max_bytes", r.MaxBytes, &s.MaxBytes, sizeWithin(1, 1<<62))
	field(p, "spool.high_water", r.HighWater, &s.HighWater, within(0, 1, false, true))
	field(p, "spool.low_water", r.LowWater, &s.LowWater, within(0, 1, true, false))
	field(p, "spool.max_body", r.MaxBody, &s.MaxBody, sizeWithin(1, MaxBody))
	field(p, "spool.max_header_bytes", r.MaxHeader, &s.MaxHeader, sizeWithin(1<<10, 1<<20))
	field(p, "spool.min_free", r.MinFree, &s.MinFree, sizeWithin(ByteSize(spool.MinFreeFloor()), 1<<62))
	list(p, "spool.methods", r.Methods, &s.Methods, checkSpoolMethod, true)
	resolveReplicate(p, &r.Replicate, &s.Replicate)
	for i, m := range s.Methods {
		s.Methods[i] = strings.ToUpper(m)
	}
	if s.LowWater >= s.HighWater {
		if r.LowWater.Set {
			p.add(r.LowWater.Line, "spool.low_water", "%g must be below spool.high_water (%g)", s.LowWater, s.HighWater)
		} else {
			p.add(r.HighWater.Line, "spool.high_water", "%g must be above spool.low_water (%g)", s.HighWater, s.LowWater)
		}
	}
	if s.MaxBody > s.MaxBytes {
		p.add(firstLine(r.MaxBody.Line, r.MaxBytes.Line), "spool.max_body", "%s exceeds spool.max_bytes (%s)", s.MaxBody, s.MaxBytes)
	}
}

func resolveUsers(p *problems, doc *docIndex, raw []rawUser) []User {
	var users []User
	seen := map[string]string{}
	for i, u := range raw {
		path := fmt.Sprintf("auth.users[%d]", i)
		var user User
		required := func(name string, o opt[string], dst *string, check func(string) error) {
			if !o.Set && o.Err == nil {
				p.add(doc.line(path), path+"."+name, "required")
				return
			}
			field(p, path+"."+name, o, dst, check)
		}
		required("username", u.Username, &user.Username, checkUsername)
		required("password", u.Password, &user.Password, nonEmpty)
		if prev, dup := seen[user.Username]; dup && user.Username != "" {
			p.add(u.Username.Line, path+".username", "duplicate username %q (also %s)", user.Username, prev)
		}
		seen[user.Username] = path
		users = append(users, user)
	}
	return users
}

// resolveHosts resolves each hosts entry over the defaults.
// With mitm, an entry that does not set connect is intercepted.
func resolveHosts(p *problems, entries []hostEntry, defaults HostConfig, minExplicit, mitm bool) map[string]HostConfig {
	hosts := make(map[string]HostConfig, len(entries))
	seen := make(map[string]hostEntry, len(entries))
	for _, e := range entries {
		key, err := normalizeHostKey(e.key)
		if err != nil {
			p.add(e.line, "hosts", "%v", err)
			continue
		}
		if prev, dup := seen[key]; dup {
			if prev.key == e.key {
				p.add(e.line, "hosts", "duplicate host key %q (first at line %d)", e.key, prev.line)
			} else {
				p.add(e.line, "hosts", "duplicate host key %q: same as %q at line %d (case, a trailing dot, a default port :80 or :443 and an IPv6 address's spelling do not matter)", e.key, prev.key, prev.line)
			}
			continue
		}
		seen[key] = e
		hosts[key], _ = resolveHost(p, childPath("hosts", e.key), e.raw, defaults, minExplicit, mitm)
	}
	return hosts
}

// resolveHost overlays r on base. minExplicit says whether base.MinRate was
// set in the file; if not, MinRate follows the resolved Rate (a tenth of it).
// mitm makes connect default to mitm.
func resolveHost(p *problems, path string, r *rawHost, base HostConfig, minExplicit, mitm bool) (HostConfig, bool) {
	h := base
	f := func(name string) string { return path + "." + name }
	field(p, f("rate"), r.Rate, &h.Rate, rateBounds)
	field(p, f("burst"), r.Burst, &h.Burst, intWithin(1, pacer.BurstMax))
	resolveConcurrency(p, f, r, &h)
	field(p, f("timeout"), r.Timeout, &h.Timeout, positive)
	field(p, f("max_queued"), r.MaxQueued, &h.MaxQueued, atLeast[int64](0))
	field(p, f("dedupe_window"), r.DedupeWindow, &h.DedupeWindow, notNegative)
	field(p, f("max_attempts"), r.MaxAttempts, &h.MaxAttempts, atLeast(1))
	field(p, f("max_age"), r.MaxAge, &h.MaxAge, positive)
	field(p, f("auto_pause_after"), r.AutoPauseAfter, &h.AutoPauseAfter, notNegative)
	field(p, f("backoff_initial"), r.BackoffInitial, &h.BackoffInitial, positive)
	field(p, f("backoff_max"), r.BackoffMax, &h.BackoffMax, positive)
	list(p, f("hold_schedule"), r.HoldSchedule, &h.HoldSchedule, positive, true)
	field(p, f("max_retry_after"), r.MaxRetryAfter, &h.MaxRetryAfter, positive)
	field(p, f("adaptive"), r.Adaptive, &h.Adaptive, nil)
	if field(p, f("min_rate"), r.MinRate, &h.MinRate, rateBounds) {
		minExplicit = true
	} else if !minExplicit {
		h.MinRate = Rate{Count: h.Rate.Count / 10, Per: h.Rate.Per}
	}
	field(p, f("breaker_failures"), r.BreakerFailures, &h.BreakerFailures, atLeast(1))
	field(p, f("breaker_cooldown"), r.BreakerCooldown, &h.BreakerCooldown, positive)
	list(p, f("retry_4xx"), r.Retry4xx, &h.Retry4xx, checkRetry4xx, false)
	field(p, f("upgrade_tls"), r.UpgradeTLS, &h.UpgradeTLS, nil)
	field(p, f("webhooks"), r.Webhooks, &h.Webhooks, oneOf(WebhooksRules, WebhooksAll, WebhooksNone))
	if !field(p, f("connect"), r.Connect, &h.Connect, oneOf(ConnectMITM, ConnectTunnel, ConnectDeny)) && mitm {
		h.Connect = ConnectMITM
	}
	field(p, f("insecure_skip_verify"), r.InsecureSkipVerify, &h.InsecureSkipVerify, nil)
	field(p, f("partner_limits"), r.PartnerLimits, &h.PartnerLimits, oneOf(PartnerLimitsObey, PartnerLimitsIgnore))
	field(p, f("partner_limits_ttl"), r.PartnerLimitsTTL, &h.PartnerLimitsTTL, positive)
	h.Sign = resolveSign(p, f("sign"), &r.Sign, base.Sign)
	h.Batch = resolveBatch(p, f("batch"), &r.Batch, base.Batch)
	h.Auth = resolveAuth(p, f("auth"), &r.Auth, base.Auth)
	h.Fairness = resolveFairness(p, f("fairness"), &r.Fairness, base.Fairness)
	h.Priority = resolvePriority(p, f("priority"), &r.Priority, base.Priority)
	h.Rewrite = resolveRewrite(p, f("rewrite"), &r.Rewrite, base.Rewrite, h.Sign)
	if sn := deref(&r.Sign); sn.Kind != 0 && deref(&r.Rewrite).Kind == 0 {
		checkRewriteSigning(p, path, sn.Line, h.Rewrite, h.Sign)
	}

	// Cross-field checks are reported only where one of the fields is set:
	// a violation wholly inherited from defaults is reported there.
	if h.BackoffMax < h.BackoffInitial {
		if l := firstLine(r.BackoffMax.Line, r.BackoffInitial.Line); l > 0 {
			p.add(l, f("backoff_max"), "%s is below backoff_initial (%s)", h.BackoffMax, h.BackoffInitial)
		}
	}
	if h.MinRate.PerSecond() > h.Rate.PerSecond() {
		if l := firstLine(r.MinRate.Line, r.Rate.Line); l > 0 {
			from := ""
			if !r.MinRate.Set {
				from = ", inherited from defaults"
			}
			p.add(l, f("min_rate"), "%s exceeds rate %s%s", h.MinRate, h.Rate, from)
		}
	}
	return h, minExplicit
}

// field stores o in *dst if it is present and passes check; otherwise it
// records why not (nothing for a missing value). It reports whether it stored.
func field[T any](p *problems, path string, o opt[T], dst *T, check func(T) error) bool {
	if o.Err != nil {
		p.add(o.Line, path, "%v", o.Err)
		return false
	}
	if !o.Set {
		return false
	}
	if check != nil {
		if err := check(o.V); err != nil {
			p.add(o.Line, path, "%v", err)
			return false
		}
	}
	*dst = o.V
	return true
}

// list is field for lists, checking each element under path[i].
func list[T any](p *problems, path string, o opt[[]opt[T]], dst *[]T, check func(T) error, nonEmpty bool) {
	if o.Err != nil || !o.Set {
		field(p, path, o, new([]opt[T]), nil)
		return
	}
	if nonEmpty && len(o.V) == 0 {
		p.add(o.Line, path, "must not be empty")
		return
	}
	out, ok := make([]T, len(o.V)), true
	for i, e := range o.V {
		// (yaml.v3 drops null elements, so each e is either set or has Err.)
		ok = field(p, fmt.Sprintf("%s[%d]", path, i), e, &out[i], check) && ok
	}
	if ok {
		*dst = out
	}
}

func firstLine(lines ...int) int {
	for _, l := range lines {
		if l > 0 {
			return l
		}
	}
	return 0
}
