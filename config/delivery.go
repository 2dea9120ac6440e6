package config

import (
	"fmt"
	"net/http"
	"time"

	"golang.org/x/net/http/httpguts"
)

// DeliveryConfig names the headers hookpace adds to every delivery attempt,
// so that a receiver can de-duplicate: the message's id, the same on every
// attempt, after a restart and after a dead-letter replay, and the attempt
// number (1 for the first). An empty name sends no such header.
// MaxInFlight bounds the attempts in flight over all hosts together (each
// host's concurrency bounds its own). MaxIdleConnections bounds the idle
// outbound connections kept over all hosts together (0: no bound; each
// host keeps at most its concurrency), each for IdleConnectionTimeout
// after its last use.
type DeliveryConfig struct {
	IDHeader              string
	AttemptHeader         string
	MaxInFlight           int
	MaxIdleConnections    int
	IdleConnectionTimeout Duration
}

type rawDelivery struct {
	IDHeader      opt[string]   `yaml:"id_header"`
	AttemptHeader opt[string]   `yaml:"attempt_header"`
	MaxInFlight   opt[int]      `yaml:"max_in_flight"`
	MaxIdleConns  opt[int]      `yaml:"max_idle_connections"`
	IdleTimeout   opt[Duration] `yaml:"idle_connection_timeout"`
}

// defaultMaxInFlight is deliver.DefaultMaxInFlight (config does not import
// deliver).
const defaultMaxInFlight = 512

// DefaultMaxIdleConnections keeps a connection for each of 5,000 hosts
// sent to in turn, with room for hosts that keep two or more: a bound
// below the hosts in use evicts, round after round, the very connection
// the next delivery needs. At about 24 KiB a connection it bounds the
// idle pool near 140 MiB however many hosts there are.
const DefaultMaxIdleConnections = 6000

// DefaultIdleConnectionTimeout closes an idle connection before the
// partner's side does: load balancers close theirs after 60 s (AWS ALB,
// GCP 600 s, nginx 75 s), and a request written as the partner closes
// fails.
const DefaultIdleConnectionTimeout = Duration(55 * time.Second)

func defaultDelivery() DeliveryConfig {
	return DeliveryConfig{IDHeader: "X-Hookpace-Id", AttemptHeader: "X-Hookpace-Attempt", MaxInFlight: defaultMaxInFlight,
		MaxIdleConnections: DefaultMaxIdleConnections, IdleConnectionTimeout: DefaultIdleConnectionTimeout}
}

func resolveDelivery(p *problems, r *rawDelivery, d *DeliveryConfig) {
	field(p, "delivery.id_header", r.IDHeader, &d.IDHeader, checkHeaderName)
	field(p, "delivery.attempt_header", r.AttemptHeader, &d.AttemptHeader, checkHeaderName)
	field(p, "delivery.max_in_flight", r.MaxInFlight, &d.MaxInFlight, atLeast(1))
	field(p, "delivery.max_idle_connections", r.MaxIdleConns, &d.MaxIdleConnections, atLeast(0))
	field(p, "delivery.idle_connection_timeout", r.IdleTimeout, &d.IdleConnectionTimeout, positive)
	if d.IDHeader != "" && http.CanonicalHeaderKey(d.IDHeader) == http.CanonicalHeaderKey(d.AttemptHeader) {
		p.add(firstLine(r.AttemptHeader.Line, r.IDHeader.Line), "delivery.attempt_header", "same header as delivery.id_header (%s)", d.IDHeader)
	}
}

// checkHeaderName accepts "" (no header) or a valid HTTP field name.
func checkHeaderName(s string) error {
	if s != "" && !httpguts.ValidHeaderFieldName(s) {
		return fmt.Errorf("%q is not a valid HTTP header name", s)
	}
	return nil
}
