package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/spool"
)

func mustParse(t *testing.T, yaml string) *Config {
	t.Helper()
	c, err := Parse("config.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

func TestExampleFile(t *testing.T) {
	c, err := Load("../config.example.yaml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	def := Default()
	// The example documents the defaults: apart from hosts, it must resolve
	// to exactly the built-in configuration.
	if got, want := withoutHosts(c), withoutHosts(def); !reflect.DeepEqual(got, want) {
		t.Errorf("example differs from Default():\n got %+v\nwant %+v", got, want)
	}
	if c.Path != "../config.example.yaml" {
		t.Errorf("Path = %q", c.Path)
	}
	if c.MITM.Enabled() || c.Auth.Enabled() || len(c.Egress.Allow) != 0 {
		t.Errorf("example must run on a fresh machine without mitm, auth or egress allow: %+v %+v %+v", c.MITM, c.Auth, c.Egress)
	}

	// Each named host is intercepted (connect: mitm), the rest pass through.
	named := def.Defaults
	named.Connect = ConnectMITM
	partner := named
	partner.Rate, partner.MinRate = Rate{2, time.Second}, Rate{0.2, time.Second}
	partner.Concurrency = 2
	other := named
	other.Rate, other.MinRate = Rate{600, time.Minute}, Rate{60, time.Minute}
	slack := named
	slack.Rate, slack.MinRate = Rate{1, time.Second}, Rate{0.1, time.Second}
	want := map[string]HostConfig{
		"api.partner.example":      partner,
		"hooks.other.example:8443": other,
		"*.slack.example":          slack,
	}
	if !reflect.DeepEqual(c.Hosts, want) {
		t.Errorf("Hosts:\n got %+v\nwant %+v", c.Hosts, want)
	}
}

func withoutHosts(c *Config) Config {
	v := *c
	v.Hosts, v.hosts, v.Path, v.lines = nil, nil, "", nil // where things are, not what
	return v
}

func TestEmptyFileIsDefault(t *testing.T) {
	for _, src := range []string{"", "# only a comment\n", "---\n"} {
		c := mustParse(t, src)
		if got, want := withoutHosts(c), withoutHosts(Default()); !reflect.DeepEqual(got, want) {
			t.Errorf("Parse(%q) = %+v, want defaults", src, got)
		}
	}
}

func TestSpoolMethods(t *testing.T) {
	if got := Default().Spool.Methods; !reflect.DeepEqual(got, []string{"POST"}) {
		t.Errorf("default spool.methods %v, want [POST]", got)
	}
	c := mustParse(t, "spool:\n  methods: [post, PUT, Patch]\n")
	if want := []string{"POST", "PUT", "PATCH"}; !reflect.DeepEqual(c.Spool.Methods, want) {
		t.Errorf("spool.methods %v, want %v (upper-cased)", c.Spool.Methods, want)
	}
}

func TestMergeSemantics(t *testing.T) {
	c := mustParse(t, `
defaults:
  rate: 5/s
  adaptive: false
  retry_4xx: []
hosts:
  inherits.example: {burst: 3}
  adaptive.example: {adaptive: true, rate: 100/m}
  NULL.example:
`)
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"defaults rate", c.Defaults.Rate, Rate{5, time.Second}},
		{"defaults min_rate follows rate", c.Defaults.MinRate, Rate{0.5, time.Second}},
		{"defaults adaptive false kept", c.Defaults.Adaptive, false},
		{"defaults explicit empty retry_4xx", c.Defaults.Retry4xx, []int{}},
		{"defaults built-in burst", c.Defaults.Burst, 20},
		{"host overrides burst", c.Hosts["inherits.example"].Burst, 3},
		{"host inherits rate", c.Hosts["inherits.example"].Rate, Rate{5, time.Second}},
		{"host inherits adaptive false", c.Hosts["inherits.example"].Adaptive, false},
		{"host inherits built-in timeout", c.Hosts["inherits.example"].Timeout, Duration(10 * time.Second)},
		{"host adaptive true overrides false", c.Hosts["adaptive.example"].Adaptive, true},
		{"host min_rate follows host rate", c.Hosts["adaptive.example"].MinRate, Rate{10, time.Minute}},
		{"host key lower-cased, null entry = defaults but connect", withConnect(c.Hosts["null.example"], ConnectTunnel), c.Defaults},
		{"connect: any other host passes through", c.Defaults.Connect, ConnectTunnel},
		{"connect: a named host is intercepted", c.Hosts["null.example"].Connect, ConnectMITM},
		{"partner_limits default obey", c.Defaults.PartnerLimits, PartnerLimitsObey},
		{"partner_limits_ttl default", c.Hosts["inherits.example"].PartnerLimitsTTL, Duration(10 * time.Minute)},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s: got %#v, want %#v", tt.name, tt.got, tt.want)
		}
	}

	c = mustParse(t, `
defaults: &d {rate: 4/s, burst: 8}
hosts:
  merged.example: {<<: *d, burst: 2}
`)
	if got := c.Hosts["merged.example"]; got.Rate != (Rate{4, time.Second}) || got.Burst != 2 {
		t.Errorf("merge key: got rate %v burst %d, want 4/s 2", got.Rate, got.Burst)
	}

	c = mustParse(t, `
mitm: {ca_cert: ca.pem, ca_key: ca-key.pem}
defaults: {min_rate: 1/s, hold_schedule: [1s]}
hosts:
  a.example: {rate: 3/s}
  b.example: {rate: 3/s, min_rate: 2/s, connect: tunnel}
  c.example: {adaptive: false}
`)
	if got := c.Hosts["a.example"].MinRate; got != (Rate{1, time.Second}) {
		t.Errorf("explicit defaults.min_rate not inherited: %v", got)
	}
	if got := c.Hosts["b.example"].MinRate; got != (Rate{2, time.Second}) {
		t.Errorf("host min_rate: %v", got)
	}
	if got := c.Hosts["a.example"].Connect; got != ConnectMITM {
		t.Errorf("connect with mitm = %q, want mitm", got)
	}
	if got := c.Hosts["b.example"].Connect; got != ConnectTunnel {
		t.Errorf("connect = %q, want tunnel", got)
	}
	if got := c.Hosts["c.example"]; got.Adaptive || !slices.Equal(got.HoldSchedule, []Duration{Duration(time.Second)}) {
		t.Errorf("c.example = %+v", got)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // substrings of the error, each naming the line and field
	}{
		{"unknown top-level field", "listen: 127.0.0.1:1\nlisen: x\n",
			[]string{`config.yaml:2: unknown field "lisen" at top level`}},
		{"unknown field in defaults", "defaults:\n  rate: 1/s\n  ratee: 2/s\n",
			[]string{`config.yaml:3: unknown field "ratee" in defaults`}},
		{"unknown field in host", "hosts:\n  a.example:\n    burst: 1\n    brust: 2\n",
			[]string{`config.yaml:4: unknown field "brust" in hosts["a.example"]`}},
		{"unknown field in host flow map", "hosts:\n  a.example: {rate: 1/s, bogus: 1}\n",
			[]string{`config.yaml:2: unknown field "bogus" in hosts["a.example"]`}},
		{"unknown nested field", "telemetry:\n  traces:\n    sampler: x\n",
			[]string{`config.yaml:3: unknown field "sampler" in telemetry.traces`}},
		{"malformed rate", "hosts:\n  api.partner.example:\n    rate: 2/x\n",
			[]string{`config.yaml:3: hosts["api.partner.example"].rate: malformed rate "2/x"`}},
		{"zero rate", "defaults:\n  rate: 0/s\n", []string{`config.yaml:2: defaults.rate: rate "0/s" must be positive`}},
		{"negative rate", "defaults:\n  rate: -1/s\n", []string{`config.yaml:2: defaults.rate: `}},
		{"zero burst", "defaults:\n  burst: 0\n", []string{`config.yaml:2: defaults.burst: must be between 1 and 1000000, got 0`}},
		{"negative concurrency", "hosts:\n  a.example: {concurrency: -2}\n",
			[]string{`config.yaml:2: hosts["a.example"].concurrency: must be at least 1, got -2`}},
		{"non-integer burst", "defaults:\n  burst: many\n", []string{`config.yaml:2: defaults.burst: want an integer, got "many"`}},
		{"bad duration", "defaults:\n  timeout: 10\n", []string{`config.yaml:2: defaults.timeout: malformed duration "10"`}},
		{"zero duration", "shutdown:\n  timeout: 0s\n", []string{`config.yaml:2: shutdown.timeout: must be positive`}},
		{"bad size", "spool:\n  max_bytes: 1XB\n", []string{`config.yaml:2: spool.max_bytes: malformed size "1XB"`}},
		{"max_body too big", "spool:\n  max_body: 65MiB\n", []string{`config.yaml:2: spool.max_body: must be between`}},
		{"max_body over what the spool stores", "spool:\n  max_body: 31MiB\n", []string{`config.yaml:2: spool.max_body: must be between 1B and 30MiB, got 31MiB`}},
		{"min_free 0", "spool:\n  min_free: 0\n", []string{`config.yaml:2: spool.min_free: must be between 9MiB and`}},
		{"min_free below the floor", "spool:\n  min_free: 4MiB\n", []string{`config.yaml:2: spool.min_free: must be between 9MiB and`}},
		{"high <= low water", "spool:\n  high_water: 0.5\n  low_water: 0.5\n",
			[]string{`config.yaml:3: spool.low_water: 0.5 must be below spool.high_water (0.5)`}},
		{"high below default low", "spool:\n  high_water: 0.3\n", []string{`config.yaml:2: spool.high_water: 0.3 must be above`}},
		{"high water > 1", "spool:\n  high_water: 1.5\n", []string{`config.yaml:2: spool.high_water: must be in (0, 1], got 1.5`}},
		{"bad partner_limits", "hosts:\n  a.example:\n    partner_limits: sometimes\n",
			[]string{`config.yaml:3: hosts["a.example"].partner_limits: must be one of obey, ignore, got "sometimes"`}},
		{"bad partner_limits_ttl", "defaults:\n  partner_limits_ttl: 0s\n", []string{`config.yaml:2: defaults.partner_limits_ttl:`}},
		{"bad connect", "hosts:\n  a.example:\n    connect: proxy\n",
			[]string{`config.yaml:3: hosts["a.example"].connect: must be one of mitm, tunnel, deny, got "proxy"`}},
		{"auth: mtls without key_file", "hosts:\n  a.example:\n    auth:\n      mtls: {cert_file: c.pem}\n", []string{`config.yaml:4: hosts["a.example"].auth.mtls.key_file: required`}},
		{"auth: oauth2 without secret", "defaults:\n  auth:\n    oauth2: {token_url: \"https://auth.example/token\", client_id: x}\n", []string{`config.yaml:3: defaults.auth.oauth2: needs the client secret`}},
		{"auth: oauth2 bad token_url", "defaults:\n  auth:\n    oauth2: {token_url: \"/token\", client_id: x, client_secret_env: S}\n", []string{`config.yaml:3: defaults.auth.oauth2.token_url: want an http:// or https:// URL`}},
		{"auth: header both file and env", "defaults:\n  auth:\n    headers:\n      X-Api-Key: {file: k, env: K}\n", []string{`config.yaml:4: defaults.auth.headers.X-Api-Key: want exactly one of file or env`}},
		{"auth: unknown field", "defaults:\n  auth:\n    basic: {user: x}\n", []string{`config.yaml:3: unknown field "basic" in defaults.auth`}},
		{"bad mitm.hosts", "mitm:\n  hosts: [partner.example, \"bad host\"]\n", []string{`config.yaml:2: mitm.hosts[1]: "bad host": malformed host name`}},
		{"empty mitm.public_dir", "mitm:\n  public_dir: \"\"\n", []string{`config.yaml:2: mitm.public_dir:`}},
		{"bad spool.methods", "spool:\n  methods: [POST, GET, connect]\n", []string{
			`config.yaml:2: spool.methods[1]: want POST, PUT, PATCH or DELETE, got "GET"`,
			`config.yaml:2: spool.methods[2]: want POST, PUT, PATCH or DELETE, got "connect"`}},
		{"empty spool.methods", "spool:\n  methods: []\n", []string{`config.yaml:2: spool.methods: must not be empty`}},
		{"spool.methods not a list", "spool:\n  methods: POST\n", []string{`config.yaml:2: spool.methods: want a list of strings`}},
		{"bad retry_4xx", "defaults:\n  retry_4xx: [408, 500, 429]\n", []string{
			`config.yaml:2: defaults.retry_4xx[1]: want a 4xx status code (400..499), got 500`,
			`config.yaml:2: defaults.retry_4xx[2]: 429 must not be listed`}},
		{"bad hold_schedule element", "defaults:\n  hold_schedule:\n    - 1s\n    - soon\n",
			[]string{`config.yaml:4: defaults.hold_schedule[1]: malformed duration "soon"`}},
		{"empty hold_schedule", "defaults:\n  hold_schedule: []\n", []string{`config.yaml:2: defaults.hold_schedule: must not be empty`}},
		{"backoff max < initial", "hosts:\n  a.example:\n    backoff_initial: 10m\n",
			[]string{`config.yaml:3: hosts["a.example"].backoff_max: 5m0s is below backoff_initial (10m0s)`}},
		{"min_rate above rate", "defaults:\n  min_rate: 5/s\nhosts:\n  a.example: {rate: 1/s}\n",
			[]string{`config.yaml:4: hosts["a.example"].min_rate: 5/s exceeds rate 1/s, inherited from defaults`}},
		{"rate over the bound", "defaults:\n  rate: 1e308/s\n", []string{`config.yaml:2: defaults.rate: must be between 0.1/h and 1e+06/s, got 1e+308/s`}},
		{"rate under the bound", "hosts:\n  a.example: {rate: 0.01/h}\n", []string{`config.yaml:2: hosts["a.example"].rate: must be between 0.1/h`}},
		{"min_rate over the bound", "defaults:\n  min_rate: 2000000/s\n", []string{`config.yaml:2: defaults.min_rate: must be between`}},
		{"burst over the bound", "defaults:\n  burst: 1000001\n", []string{`config.yaml:2: defaults.burst: must be between 1 and 1000000, got 1000001`}},
		{"bad enum", "log:\n  level: verbose\n", []string{`config.yaml:2: log.level: must be one of debug, info, warn, error, got "verbose"`}},
		{"bad listen", "listen: 8080\n", []string{`config.yaml:1: listen: malformed address "8080": want host:port`}},
		{"listen == admin", "listen: 127.0.0.1:9090\n", []string{`config.yaml:1: admin: same address as listen`}},
		{"bad host key", "hosts:\n  https://a.example/hook: {}\n", []string{`config.yaml:2: hosts: host key "https://a.example/hook"`}},
		{"bad host key port", "hosts:\n  a.example:99999: {}\n", []string{`config.yaml:2: hosts: host key "a.example:99999": malformed port`}},
		{"duplicate host after lower-casing", "hosts:\n  a.example: {}\n  A.Example: {}\n",
			[]string{`config.yaml:3: hosts: duplicate host key "A.Example"`}},
		{"duplicate key", "defaults:\n  burst: 1\n  burst: 2\n", []string{`config.yaml:3: duplicate key "burst" in defaults (first at line 2)`}},
		{"host not a mapping", "hosts:\n  a.example: 5\n", []string{`config.yaml:2: hosts["a.example"]: want a mapping, got "5"`}},
		{"section not a mapping", "spool: [a]\n", []string{`config.yaml:1: spool: want a mapping, got !!seq`}},
		{"bad egress CIDR", "egress:\n  allow: [10.0.0.0/33]\n", []string{`config.yaml:2: egress.allow[0]: malformed CIDR "10.0.0.0/33"`}},
		{"bad egress entry", "egress:\n  deny:\n    - 10.0.0\n", []string{`config.yaml:3: egress.deny[0]: malformed IP address`}},
		{"auth user without password", "auth:\n  users:\n    - username: app\n",
			[]string{`config.yaml:3: auth.users[0].password: required`}},
		{"mitm cert without key", "mitm:\n  ca_cert: ca.pem\n", []string{`config.yaml:2: mitm.ca_key: required when mitm.ca_cert is set`}},
		{"otlp without endpoint", "telemetry:\n  traces:\n    exporter: otlp\n",
			[]string{`config.yaml:3: telemetry.traces.endpoint: required when exporter is otlp`}},
		{"sample ratio", "telemetry:\n  traces: {sample_ratio: 2}\n", []string{`config.yaml:2: telemetry.traces.sample_ratio: must be in [0, 1], got 2`}},
		{"exact duplicate host", "hosts:\n  a.example: {}\n  a.example: {}\n",
			[]string{`config.yaml:3: hosts: duplicate host key "a.example" (first at line 2)`}},
		{"duplicate key in host", "hosts:\n  a.example: {burst: 1, burst: 2}\n",
			[]string{`config.yaml:2: duplicate key "burst" in hosts["a.example"]`}},
		{"unknown field via merge", "hosts:\n  a.example: &a {bogus: 1}\n  b.example: {<<: *a}\n",
			[]string{`config.yaml:2: unknown field "bogus" in hosts["a.example"]`}},
		{"hosts not a mapping", "hosts: [a.example]\n", []string{`config.yaml:1: hosts: want a mapping of host keys to settings`}},
		{"top level not a mapping", "- a\n", []string{`config.yaml:1: want a mapping, got !!seq`}},
		{"yaml syntax", "defaults:\n  rate: 1/s\n bad\n", []string{`config.yaml:2: did not find expected key`}},
		{"all errors reported", "defaults:\n  burst: 0\n  concurrency: 0\nspool:\n  max_bytes: lots\n", []string{
			`config.yaml:2: defaults.burst`, `config.yaml:3: defaults.concurrency`, `config.yaml:5: spool.max_bytes`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("config.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse succeeded, want error; got %+v", c)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
			// Exactly the expected problems: no cascades, no duplicates.
			errs := err.(interface{ Unwrap() []error }).Unwrap()
			if len(errs) != len(tt.want) {
				t.Errorf("got %d errors, want %d:\n%v", len(errs), len(tt.want), err)
			}
			for _, e := range errs {
				if fe, ok := e.(*FieldError); !ok || fe.File != "config.yaml" || fe.Line == 0 {
					t.Errorf("not a *FieldError for config.yaml with a line: %#v", e)
				}
			}
		})
	}
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hookpace.yaml")
	if _, err := Load(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want ErrNotExist", err)
	}
	if err := os.WriteFile(path, []byte("spool:\n  dir: /var/lib/hookpace\n  max_body: 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if want := path + ":3: spool.max_body:"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Load error = %v, want it to contain %q", err, want)
	}
}

func TestRestartRequired(t *testing.T) {
	base := Default()
	tests := []struct {
		name string
		edit func(c *Config)
		want []string
	}{
		{"identical", func(c *Config) {}, nil},
		{"live-tunable change", func(c *Config) { c.Defaults.Rate = Rate{1, time.Second}; c.Log.Level = "debug" }, nil},
		{"listen", func(c *Config) { c.Listen = "127.0.0.1:8081" }, []string{"listen"}},
		{"admin and spool dir", func(c *Config) { c.Admin = ":9091"; c.Spool.Dir = "/tmp/x" }, []string{"admin", "spool.dir"}},
		{"same dir spelled differently", func(c *Config) { c.Spool.Dir = "data/" }, nil},
		{"files", func(c *Config) { c.TLS.CAFile = "ca.pem"; c.MITM.CACert, c.MITM.CAKey = "c.pem", "k.pem" },
			[]string{"mitm.ca_cert", "mitm.ca_key", "tls.ca_file"}},
		{"telemetry and log format", func(c *Config) {
			c.Telemetry.Traces.SampleRatio = 0.5
			c.Telemetry.MaxHostLabels = 5
			c.Log.Format = "json"
		}, []string{"log.format", "telemetry.max_host_labels", "telemetry.traces"}},
		{"applied live", func(c *Config) {
			c.Spool.MaxBody, c.Spool.MaxMessages, c.Spool.HighWater = 2<<20, 5, 0.9
			c.Egress.Deny = []string{"x.example"}
			c.Auth.Users = []User{{"a", "b"}}
			c.Shutdown.Timeout = Duration(time.Minute)
		}, nil},
	}
	for _, tt := range tests {
		c := Default()
		tt.edit(c)
		if got := RestartRequired(base, c); !slices.Equal(got, tt.want) {
			t.Errorf("%s: RestartRequired = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestMaxBodyFitsTheSpool: the largest max_body, with a megabyte of
// headers and URL, is a record the spool stores.
func TestMaxBodyFitsTheSpool(t *testing.T) {
	if MaxBody+1<<20 > spool.MaxRecordSize {
		t.Fatalf("max_body up to %d plus 1 MiB of headers exceeds what the spool stores (%d)", MaxBody, spool.MaxRecordSize)
	}
}

func withConnect(h HostConfig, mode string) HostConfig {
	h.Connect = mode
	return h
}

// TestConnectDefaults: without an operator CA, a hosts entry is intercepted
// unless it or defaults says otherwise, and every other host passes
// through; mitm.hosts, when set, is the CA's names, else the entries
// whose connect is mitm.
func TestConnectDefaults(t *testing.T) {
	c, err := Parse("config.yaml", []byte(`
hosts:
  "api.partner.example": {}
  "*.slack.example": {}
  "10.0.0.5:8443": {}
  "plain.example": {connect: tunnel}
  "closed.example": {connect: deny}
`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.MITMNames(), []string{"*.slack.example", "10.0.0.5:8443", "api.partner.example"}; !reflect.DeepEqual(got, want) {
		t.Errorf("MITMNames = %q, want %q", got, want)
	}
	if c.Defaults.Connect != ConnectTunnel || c.Hosts["plain.example"].Connect != ConnectTunnel || c.Hosts["closed.example"].Connect != ConnectDeny {
		t.Errorf("connect: defaults %s, plain %s, closed %s", c.Defaults.Connect, c.Hosts["plain.example"].Connect, c.Hosts["closed.example"].Connect)
	}
	if c.TrustDir() != filepath.Join("data", "trust") || c.OwnCADir() != filepath.Join("data", "mitm") {
		t.Errorf("TrustDir %q, OwnCADir %q", c.TrustDir(), c.OwnCADir())
	}

	c, err = Parse("config.yaml", []byte(`
defaults: {connect: deny}
mitm: {hosts: ["*.partner.example"], public_dir: /run/trust}
hosts:
  "a.partner.example": {}
  "b.example": {connect: mitm}
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Hosts["a.partner.example"].Connect != ConnectDeny || c.Hosts["b.example"].Connect != ConnectMITM {
		t.Errorf("explicit defaults.connect: a %s, b %s", c.Hosts["a.partner.example"].Connect, c.Hosts["b.example"].Connect)
	}
	if got := c.MITMNames(); !reflect.DeepEqual(got, []string{"*.partner.example"}) || c.TrustDir() != "/run/trust" {
		t.Errorf("MITMNames %q, TrustDir %q", got, c.TrustDir())
	}
}
