package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestReplicateDefaults(t *testing.T) {
	c := mustParse(t, "spool:\n  replicate:\n    nats:\n      urls: [nats://10.0.0.1:4222, tls://n2:4222]\n")
	r := c.Spool.Replicate
	if !r.Enabled() || !slices.Equal(r.URLs, []string{"nats://10.0.0.1:4222", "tls://n2:4222"}) || r.Replicas != 3 ||
		r.Stream != "hookpace" || r.OnUnavailable != UnavailableRefuse || r.AdoptAfter.D() != 30*time.Second {
		t.Fatalf("replicate = %+v", r)
	}
	if mustParse(t, "listen: 127.0.0.1:8080\n").Spool.Replicate.Enabled() {
		t.Fatal("replication enabled without a section")
	}
}

func TestReplicateParse(t *testing.T) {
	c := mustParse(t, `
spool:
  replicate:
    nats:
      urls: [nats://a:4222]
      replicas: 1
      stream: payments
      user: hookpace
      password_file: /etc/nats/pw
      on_unavailable: local
      adopt_after: 10s
      timeout: 1s
`)
	r := c.Spool.Replicate
	if r.Replicas != 1 || r.Stream != "payments" || r.User != "hookpace" || r.PasswordFile != "/etc/nats/pw" ||
		r.OnUnavailable != UnavailableLocal || r.AdoptAfter.D() != 10*time.Second || r.Timeout.D() != time.Second {
		t.Fatalf("replicate = %+v", r)
	}
}

func TestReplicateErrors(t *testing.T) {
	const at = "spool:\n  replicate:\n    nats:\n"
	for _, tc := range []struct{ yaml, want string }{
		{at + "      urls: [http://a:4222]\n", "config.yaml:4: spool.replicate.nats.urls[0]: want a nats:// or tls:// URL"},
		{at + "      urls: [nats://u:p@a:4222]\n", "config.yaml:4: spool.replicate.nats.urls[0]: give credentials in creds_file"},
		{at + "      urls: []\n", "config.yaml:4: spool.replicate.nats.urls: must not be empty"},
		{at + "      replicas: 3\n", "config.yaml:4: spool.replicate.nats.urls: required in a spool.replicate.nats section"},
		{at + "      urls: [nats://a:1]\n      replicas: 7\n", "config.yaml:5: spool.replicate.nats.replicas"},
		{at + "      urls: [nats://a:1]\n      stream: a.b\n", `config.yaml:5: spool.replicate.nats.stream: "."`},
		{at + "      urls: [nats://a:1]\n      on_unavailable: drop\n", "config.yaml:5: spool.replicate.nats.on_unavailable"},
		{at + "      urls: [nats://a:1]\n      user: u\n", "config.yaml:5: spool.replicate.nats.password_file: required with user"},
		{at + "      urls: [nats://a:1]\n      creds_file: /c\n      user: u\n      password_file: /p\n", "config.yaml:6: spool.replicate.nats.creds_file: give one of"},
		{at + "      urls: [nats://a:1]\n      cert_file: /c\n", "config.yaml:5: spool.replicate.nats.cert_file: cert_file and key_file go together"},
		{at + "      urls: [nats://a:1]\n      adopt_after: 3s\n      timeout: 2s\n", "config.yaml:6: spool.replicate.nats.timeout: 2s must be under a third of adopt_after"},
		{at + "      urls: [nats://a:1]\n      adopt: 3s\n", "config.yaml:5"},
	} {
		_, err := Parse("config.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

func TestReplicateNeedsRestart(t *testing.T) {
	old := mustParse(t, "spool:\n  replicate:\n    nats:\n      urls: [nats://a:1]\n")
	same := mustParse(t, "spool:\n  replicate:\n    nats:\n      urls: [nats://a:1]\n")
	other := mustParse(t, "spool:\n  replicate:\n    nats:\n      urls: [nats://a:1]\n      adopt_after: 1m\n")
	if slices.Contains(RestartRequired(old, same), "spool.replicate") || !slices.Contains(RestartRequired(old, other), "spool.replicate") {
		t.Fatal("spool.replicate restart detection")
	}
}

func TestReplicateEmbedded(t *testing.T) {
	c := mustParse(t, `
spool:
  dir: /var/lib/hookpace
  replicate:
    nats:
      embedded:
        peers: [hp-0.hp:6222, hp-1.hp:6222, hp-2.hp:6222]
`)
	r := c.Spool.Replicate
	e := r.Embedded
	if !r.Enabled() || e == nil || len(r.URLs) != 0 || !slices.Equal(e.Peers, []string{"hp-0.hp:6222", "hp-1.hp:6222", "hp-2.hp:6222"}) ||
		e.Listen != "127.0.0.1:4222" || e.ClusterListen != "0.0.0.0:6222" || e.StoreDir != "" || e.Cluster != "hookpace" {
		t.Fatalf("embedded = %+v %+v", r, e)
	}
	c = mustParse(t, `
spool:
  replicate:
    nats:
      urls: [nats://nats-extra:4222]
      replicas: 1
      embedded: {peers: ["127.0.0.1:7001"], listen: "0.0.0.0:7000", cluster_listen: "127.0.0.1:7001", store_dir: /data/js, cluster: gw}
`)
	e = c.Spool.Replicate.Embedded
	if e.Listen != "0.0.0.0:7000" || e.ClusterListen != "127.0.0.1:7001" || e.StoreDir != "/data/js" || e.Cluster != "gw" ||
		!slices.Equal(c.Spool.Replicate.URLs, []string{"nats://nats-extra:4222"}) {
		t.Fatalf("embedded = %+v", e)
	}
	old := mustParse(t, "spool:\n  replicate:\n    nats:\n      embedded: {peers: [\"a:1\", \"b:1\", \"c:1\"]}\n")
	other := mustParse(t, "spool:\n  replicate:\n    nats:\n      embedded: {peers: [\"a:1\", \"b:1\", \"d:1\"]}\n")
	if slices.Contains(RestartRequired(old, old), "spool.replicate") || !slices.Contains(RestartRequired(old, other), "spool.replicate") {
		t.Fatal("a change of embedded.peers must need a restart")
	}
}

func TestReplicateEmbeddedErrors(t *testing.T) {
	const at = "spool:\n  replicate:\n    nats:\n"
	for _, tc := range []struct{ yaml, want string }{
		{at + "      embedded: {listen: \"127.0.0.1:4222\"}\n", "config.yaml:4: spool.replicate.nats.embedded.peers: required"},
		{at + "      embedded:\n        peers: [a]\n", "config.yaml:5: spool.replicate.nats.embedded.peers[0]: want host:port"},
		{at + "      embedded:\n        peers: []\n", "config.yaml:5: spool.replicate.nats.embedded.peers: must not be empty"},
		{at + "      embedded:\n        peers: [\"a:1\", \"b:1\"]\n", "config.yaml:5: spool.replicate.nats.replicas: 3 replicas, but embedded.peers names 2 servers"},
		{at + "      embedded:\n        peers: [\"a:1\"]\n        cluster_listen: 6222\n", "config.yaml:6: spool.replicate.nats.embedded.cluster_listen"},
		{at + "      embedded:\n        peers: [\"a:1\"]\n        listen: nope\n", "config.yaml:6: spool.replicate.nats.embedded.listen"},
		{at + "      embedded:\n        peers: [\"a:1\"]\n        cluster: a.b\n", "config.yaml:6: spool.replicate.nats.embedded.cluster"},
		{at + "      embedded:\n        peers: [\"a:1\"]\n        port: 1\n", "config.yaml:6"},
		{at + "      replicas: 1\n      creds_file: /c\n      embedded: {peers: [\"a:1\"]}\n", "config.yaml:5: spool.replicate.nats.creds_file: not with embedded"},
		{at + "      replicas: 1\n      tls: true\n      embedded: {peers: [\"a:1\"]}\n", "config.yaml:5: spool.replicate.nats.tls: not with embedded"},
	} {
		_, err := Parse("config.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
	if _, err := Parse("config.yaml", []byte(at+"      replicas: 1\n      tls: false\n      embedded: {peers: [\"a:1\"]}\n")); err != nil {
		t.Errorf("tls: false with embedded: %v", err)
	}
}
