package config

import (
	"net/http"
)

// DedupeConfig names the ingest headers of idempotent enqueue and
// coalescing, and bounds the idempotency keys the spool
// remembers. How long a key is remembered is set per host (dedupe_window).
type DedupeConfig struct {
	// IdempotencyHeader is the request header whose value makes a POST a
	// repeat of an earlier one for the same host; "" turns dedupe off.
	// It is forwarded to the partner unchanged.
	IdempotencyHeader string
	// CoalesceHeader is the request header that names a still-queued
	// webhook to replace; "" turns coalescing off. It is stripped before
	// delivery.
	CoalesceHeader string
	MaxKeys        int64    // idempotency keys remembered at most
	MaxBytes       ByteSize // bytes of idempotency keys remembered at most
}

type rawDedupe struct {
	IdempotencyHeader opt[string]   `yaml:"idempotency_header"`
	CoalesceHeader    opt[string]   `yaml:"coalesce_header"`
	MaxKeys           opt[int64]    `yaml:"max_keys"`
	MaxBytes          opt[ByteSize] `yaml:"max_bytes"`
}

func defaultDedupe() DedupeConfig {
	return DedupeConfig{IdempotencyHeader: "Idempotency-Key", CoalesceHeader: "Hookpace-Coalesce-Key",
		MaxKeys: 1_000_000, MaxBytes: 256 << 20}
}

func resolveDedupe(p *problems, r *rawDedupe, d *DedupeConfig) {
	field(p, "dedupe.idempotency_header", r.IdempotencyHeader, &d.IdempotencyHeader, checkHeaderName)
	field(p, "dedupe.coalesce_header", r.CoalesceHeader, &d.CoalesceHeader, checkHeaderName)
	if d.CoalesceHeader != "" && http.CanonicalHeaderKey(d.IdempotencyHeader) == http.CanonicalHeaderKey(d.CoalesceHeader) {
		p.add(firstLine(r.CoalesceHeader.Line, r.IdempotencyHeader.Line), "dedupe.coalesce_header",
			"same header as dedupe.idempotency_header (%s)", d.IdempotencyHeader)
	}
	field(p, "dedupe.max_keys", r.MaxKeys, &d.MaxKeys, atLeast[int64](1))
	field(p, "dedupe.max_bytes", r.MaxBytes, &d.MaxBytes, sizeWithin(1<<10, 1<<40))
}
