package server

import (
	"testing"
	"time"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/egress"
)

func TestDeliveryIdle(t *testing.T) {
	for _, tt := range []struct {
		yaml           string
		perHost, total int
		timeout        time.Duration
	}{
		{"listen: 127.0.0.1:1\n", config.DefaultMaxConcurrency, config.DefaultMaxIdleConnections, 55 * time.Second},
		{"hosts:\n  a.example: {concurrency: 200}\n  b.example: {concurrency: 2}\n", 200, config.DefaultMaxIdleConnections, 55 * time.Second},
		{"defaults: {concurrency: auto, max_concurrency: 300}\ndelivery: {max_idle_connections: 5000, idle_connection_timeout: 2m}\n", 300, 5000, 2 * time.Minute},
		{"delivery: {max_idle_connections: 0}\n", config.DefaultMaxConcurrency, 0, 55 * time.Second},
	} {
		guard, err := egress.NewSwap(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Parse("config.yaml", []byte(tt.yaml))
		if err != nil {
			t.Fatal(err)
		}
		if got := deliveryIdle(cfg); got.PerHost != tt.perHost || got.Total != tt.total {
			t.Errorf("%q: %+v, want per host %d, total %d", tt.yaml, got, tt.perHost, tt.total)
		}
		tr := transport(guard, nil, false, deliveryIdle(cfg))
		if tr.MaxIdleConns != tt.total || tr.MaxIdleConnsPerHost != tt.perHost || tr.IdleConnTimeout != tt.timeout {
			t.Errorf("%q: transport keeps %d in all, %d per host, for %v", tt.yaml, tr.MaxIdleConns, tr.MaxIdleConnsPerHost, tr.IdleConnTimeout)
		}
	}
}
