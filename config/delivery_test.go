package config

import (
	"strings"
	"testing"
	"time"
)

func TestDeliveryHeaders(t *testing.T) {
	c, err := Parse("config.yaml", []byte("listen: 127.0.0.1:1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Delivery.IDHeader != "X-Hookpace-Id" || c.Delivery.AttemptHeader != "X-Hookpace-Attempt" {
		t.Fatalf("defaults %+v", c.Delivery)
	}
	c, err = Parse("config.yaml", []byte("delivery:\n  id_header: Idempotency-Key\n  attempt_header: \"\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Delivery.IDHeader != "Idempotency-Key" || c.Delivery.AttemptHeader != "" {
		t.Fatalf("renamed and off: %+v", c.Delivery)
	}
	for _, tt := range []struct{ yaml, want string }{
		{"delivery:\n  id_header: \"X Id\"\n", `config.yaml:2: delivery.id_header: "X Id" is not a valid HTTP header name`},
		{"delivery:\n  attempt_header: \"X:A\"\n", `config.yaml:2: delivery.attempt_header: "X:A" is not a valid HTTP header name`},
		{"delivery:\n  id_header: x-n\n  attempt_header: X-N\n", `config.yaml:3: delivery.attempt_header: same header as delivery.id_header (x-n)`},
	} {
		_, err := Parse("config.yaml", []byte(tt.yaml))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want %s", tt.yaml, err, tt.want)
		}
	}
}

func TestMaxIdleConnections(t *testing.T) {
	if c := mustParse(t, "listen: 127.0.0.1:1\n"); c.Delivery.MaxIdleConnections != 6000 || c.Delivery.IdleConnectionTimeout != Duration(55*time.Second) {
		t.Fatalf("default %d for %v, want 6000 for 55s", c.Delivery.MaxIdleConnections, c.Delivery.IdleConnectionTimeout)
	}
	if c := mustParse(t, "delivery:\n  max_idle_connections: 0\n  idle_connection_timeout: 2m\n"); c.Delivery.MaxIdleConnections != 0 || c.Delivery.IdleConnectionTimeout != Duration(2*time.Minute) {
		t.Fatalf("0 and 2m: %d, %v", c.Delivery.MaxIdleConnections, c.Delivery.IdleConnectionTimeout)
	}
	_, err0 := Parse("config.yaml", []byte("delivery:\n  idle_connection_timeout: 0s\n"))
	if want := "config.yaml:2: delivery.idle_connection_timeout: must be positive"; err0 == nil || !strings.Contains(err0.Error(), want) {
		t.Fatalf("0s: %v, want %s", err0, want)
	}
	if c := mustParse(t, "delivery:\n  max_idle_connections: 20000\n"); c.Delivery.MaxIdleConnections != 20000 {
		t.Fatalf("set: %d", c.Delivery.MaxIdleConnections)
	}
	_, err := Parse("config.yaml", []byte("delivery:\n  max_idle_connections: -1\n"))
	if want := "config.yaml:2: delivery.max_idle_connections: must be at least 0, got -1"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("-1: %v, want %s", err, want)
	}
}
