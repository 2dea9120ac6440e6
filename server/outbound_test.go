package server

import (
	"testing"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/egress"
)

func TestDeliveryIdle(t *testing.T) {
	for _, tt := range []struct {
		yaml           string
		perHost, total int
	}{
		{"listen: 127.0.0.1:1\n", config.DefaultMaxConcurrency, 0},
		{"hosts:\n  a.example: {concurrency: 200}\n  b.example: {concurrency: 2}\n", 200, 0},
		{"defaults: {concurrency: auto, max_concurrency: 300}\ndelivery: {max_idle_connections: 5000}\n", 300, 5000},
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
		if tr.MaxIdleConns != tt.total || tr.MaxIdleConnsPerHost != tt.perHost {
			t.Errorf("%q: transport keeps %d in all, %d per host", tt.yaml, tr.MaxIdleConns, tr.MaxIdleConnsPerHost)
		}
	}
}
