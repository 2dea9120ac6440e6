package config

import "fmt"

// DedupeConfig names the ingest header of idempotent enqueue (issue 20),
// and bounds the idempotency keys the spool
// remembers. How long a key is remembered is set per host (dedupe_window).
type DedupeConfig struct {
	// IdempotencyHeader is the request header whose value makes a POST a
	// repeat of an earlier one for the same host; "" turns dedupe off.
	// It is forwarded to the partner unchanged.
	IdempotencyHeader string
	MaxKeys           int64    // idempotency keys remembered at most
	MaxBytes          ByteSize // bytes of idempotency keys remembered at most
}

type rawDedupe struct {
	IdempotencyHeader opt[string]   `yaml:"idempotency_header"`
	MaxKeys           opt[int64]    `yaml:"max_keys"`
	MaxBytes          opt[ByteSize] `yaml:"max_bytes"`
}

func defaultDedupe() DedupeConfig {
	return DedupeConfig{IdempotencyHeader: "Idempotency-Key", MaxKeys: 1_000_000, MaxBytes: 256 << 20}
}

func resolveDedupe(p *problems, r *rawDedupe, d *DedupeConfig) {
	field(p, "dedupe.idempotency_header", r.IdempotencyHeader, &d.IdempotencyHeader, checkHeaderName)
	field(p, "dedupe.max_keys", r.MaxKeys, &d.MaxKeys, atLeast[int64](1))
	field(p, "dedupe.max_bytes", r.MaxBytes, &d.MaxBytes, sizeWithin(1<<10, 1<<40))
}

// notNegative accepts 0 (off) or a positive duration.
func notNegative(d Duration) error {
	if d < 0 {
		return fmt.Errorf("must be 0 (off) or positive, got %s", d)
	}
	return nil
}
