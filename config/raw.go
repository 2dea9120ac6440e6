package config

import (
	"errors"
	"fmt"
	"strconv"

	"gopkg.in/yaml.v3"
)

// The file is decoded twice (see decode): once into a yaml.Node tree, which
// gives the line of every key and value (docIndex), and once with
// KnownFields(true) into the raw* structs below (hosts entries are decoded
// one by one, see decodeHosts). Every leaf is an opt[T], which records its
// line, whether it was present at all (so `adaptive: false` differs from a
// missing `adaptive`), and a parse error instead of failing the decode, so
// that validation can report every bad value under its field name.
//
// opt must only wrap leaves: Node.Decode starts a fresh decoder without
// KnownFields, so structs decoded through it would accept unknown fields.

type opt[T any] struct {
	V    T
	Set  bool
	Line int
	Err  error
}

func (o *opt[T]) UnmarshalYAML(n *yaml.Node) error {
	o.Line = n.Line
	if err := n.Decode(&o.V); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			err = fmt.Errorf("want %s, got %s", describe(any(o.V)), quoteNode(n))
		}
		o.Err = err
		return nil
	}
	o.Set = true
	return nil
}

func describe(v any) string {
	switch v.(type) {
	case int, int64:
		return "an integer"
	case float64:
		return "a number"
	case bool:
		return "true or false"
	case string:
		return "a string"
	case []opt[int]:
		return "a list of integers"
	case []opt[string]:
		return "a list of strings"
	case []opt[Duration]:
		return "a list of durations"
	}
	return fmt.Sprintf("%T", v)
}

func quoteNode(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return strconv.Quote(n.Value)
	}
	return scalarText(n)
}

type rawConfig struct {
	Listen    opt[string]  `yaml:"listen"`
	Admin     yaml.Node    `yaml:"admin"` // see decodeAdmin
	Log       rawLog       `yaml:"log"`
	Spool     rawSpool     `yaml:"spool"`
	Defaults  rawHost      `yaml:"defaults"`
	Hosts     yaml.Node    `yaml:"hosts"` // see decodeHosts
	MITM      rawMITM      `yaml:"mitm"`
	TLS       rawTLS       `yaml:"tls"`
	Egress    rawEgress    `yaml:"egress"`
	Auth      rawAuth      `yaml:"auth"`
	Telemetry rawTelemetry `yaml:"telemetry"`
	Shutdown  rawShutdown  `yaml:"shutdown"`
	Fleet     rawFleet     `yaml:"fleet"`
	Delivery  rawDelivery  `yaml:"delivery"`
	Dedupe    rawDedupe    `yaml:"dedupe"`
	Journal   rawJournal   `yaml:"journal"`
	Proxy     rawProxy     `yaml:"proxy"`
	Events    rawEvents    `yaml:"events"`
	Memory    rawMemory    `yaml:"memory"`
	Inbound   yaml.Node    `yaml:"inbound"` // see resolveInbound
	Webhooks  []rawWebhook `yaml:"webhooks"`
	Capture   rawCapture   `yaml:"capture"`
}

type rawLog struct {
	Format opt[string] `yaml:"format"`
	Level  opt[string] `yaml:"level"`
}

type rawSpool struct {
	Dir         opt[string]        `yaml:"dir"`
	MaxMessages opt[int64]         `yaml:"max_messages"`
	MaxBytes    opt[ByteSize]      `yaml:"max_bytes"`
	HighWater   opt[float64]       `yaml:"high_water"`
	LowWater    opt[float64]       `yaml:"low_water"`
	MaxBody     opt[ByteSize]      `yaml:"max_body"`
	MaxHeader   opt[ByteSize]      `yaml:"max_header_bytes"`
	MinFree     opt[ByteSize]      `yaml:"min_free"`
	Methods     opt[[]opt[string]] `yaml:"methods"`
	Replicate   rawReplicate       `yaml:"replicate"`
}

type rawHost struct {
	Rate               opt[Rate]            `yaml:"rate"`
	Burst              opt[int]             `yaml:"burst"`
	Concurrency        opt[autoOrInt]       `yaml:"concurrency"` // concurrency.go
	MaxConcurrency     opt[int]             `yaml:"max_concurrency"`
	Timeout            opt[Duration]        `yaml:"timeout"`
	MaxQueued          opt[int64]           `yaml:"max_queued"`
	DedupeWindow       opt[Duration]        `yaml:"dedupe_window"`
	MaxAttempts        opt[int]             `yaml:"max_attempts"`
	MaxAge             opt[Duration]        `yaml:"max_age"`
	AutoPauseAfter     opt[Duration]        `yaml:"auto_pause_after"`
	BackoffInitial     opt[Duration]        `yaml:"backoff_initial"`
	BackoffMax         opt[Duration]        `yaml:"backoff_max"`
	HoldSchedule       opt[[]opt[Duration]] `yaml:"hold_schedule"`
	MaxRetryAfter      opt[Duration]        `yaml:"max_retry_after"`
	Adaptive           opt[bool]            `yaml:"adaptive"`
	MinRate            opt[Rate]            `yaml:"min_rate"`
	BreakerFailures    opt[int]             `yaml:"breaker_failures"`
	BreakerCooldown    opt[Duration]        `yaml:"breaker_cooldown"`
	Retry4xx           opt[[]opt[int]]      `yaml:"retry_4xx"`
	UpgradeTLS         opt[bool]            `yaml:"upgrade_tls"`
	Connect            opt[string]          `yaml:"connect"`
	Webhooks           opt[string]          `yaml:"webhooks"`
	InsecureSkipVerify opt[bool]            `yaml:"insecure_skip_verify"`
	PartnerLimits      opt[string]          `yaml:"partner_limits"`
	PartnerLimitsTTL   opt[Duration]        `yaml:"partner_limits_ttl"`
	Sign               yaml.Node            `yaml:"sign"`     // see resolveSign
	Batch              yaml.Node            `yaml:"batch"`    // see resolveBatch
	Auth               yaml.Node            `yaml:"auth"`     // see resolveAuth (the host's credentials)
	Fairness           yaml.Node            `yaml:"fairness"` // see resolveFairness
	Priority           yaml.Node            `yaml:"priority"` // see resolvePriority
	Rewrite            yaml.Node            `yaml:"rewrite"`  // see resolveRewrite
}

type rawMITM struct {
	CACert    opt[string]        `yaml:"ca_cert"`
	CAKey     opt[string]        `yaml:"ca_key"`
	CacheSize opt[int]           `yaml:"cache_size"`
	Hosts     opt[[]opt[string]] `yaml:"hosts"`
	PublicDir opt[string]        `yaml:"public_dir"`
	Scope     opt[string]        `yaml:"scope"`
	Exclude   opt[[]opt[string]] `yaml:"exclude"`
}

type rawTLS struct {
	CAFile opt[string] `yaml:"ca_file"`
}

type rawEgress struct {
	Allow opt[[]opt[string]] `yaml:"allow"`
	Deny  opt[[]opt[string]] `yaml:"deny"`
}

type rawAuth struct {
	Users []rawUser `yaml:"users"`
}

type rawUser struct {
	Username opt[string] `yaml:"username"`
	Password opt[string] `yaml:"password"`
}

type rawTelemetry struct {
	MaxHostLabels       opt[int]    `yaml:"max_host_labels"`
	MetricsOTLPEndpoint opt[string] `yaml:"metrics_otlp_endpoint"`
	Traces              rawTraces   `yaml:"traces"`
}

type rawTraces struct {
	Exporter    opt[string]  `yaml:"exporter"`
	Endpoint    opt[string]  `yaml:"endpoint"`
	SampleRatio opt[float64] `yaml:"sample_ratio"`
}
