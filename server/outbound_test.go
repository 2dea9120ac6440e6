package server

import (
	"testing"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/proxy"
)

func TestPoliciesSharedByHostsEntry(t *testing.T) {
	cfg, err := config.Parse("p.yaml", []byte("defaults: {rate: 10/s}\n"+
		"hosts:\n"+
		"  \"*.a.example\": {rate: 5/s}\n"+
		"  b.example: {rate: 2/s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := LoadFiles(cfg)
	if err != nil {
		t.Fatal(err)
	}
	policy := policies(cfg, files)
	x, y := policy("x.test"), policy("y.test:8443")
	if x != y || x.Limits.Rate != 10 {
		t.Errorf("two hosts on the defaults: %p and %p at %v/s; want one policy at 10/s", x, y, x.Limits.Rate)
	}
	a1, a2 := policy("one.a.example"), policy("two.a.example")
	if a1 != a2 || a1 == x || a1.Limits.Rate != 5 {
		t.Errorf("two hosts of *.a.example: %p and %p at %v/s (defaults %p); want one policy of their own at 5/s", a1, a2, a1.Limits.Rate, x)
	}
	if b := policy("b.example"); b == x || b == a1 || b.Limits.Rate != 2 {
		t.Errorf("b.example: %v/s, shared with another entry: %v", b.Limits.Rate, b == x || b == a1)
	}
	if again := policies(cfg, files)("x.test"); again == x {
		t.Error("a new policy source (a reload) gave the old source's policy")
	}
}

// Every connect:, webhooks: and fairness.key word config takes reaches the
// proxy as its own mode, none as another's.
func TestProxyModes(t *testing.T) {
	for word, want := range map[string]proxy.Connect{
		config.ConnectTunnel: proxy.ConnectTunnel, config.ConnectMITM: proxy.ConnectMITM, config.ConnectDeny: proxy.ConnectDeny,
	} {
		if got := proxyConnect(word); got != want {
			t.Errorf("connect: %s is proxy mode %d, want %d", word, got, want)
		}
	}
	for word, want := range map[string]proxy.WebhooksMode{
		"": proxy.WebhooksRules, config.WebhooksRules: proxy.WebhooksRules, config.WebhooksAll: proxy.WebhooksAll, config.WebhooksNone: proxy.WebhooksNone,
	} {
		if got := proxyWebhooks(word); got != want {
			t.Errorf("webhooks: %q is proxy mode %d, want %d", word, got, want)
		}
	}
	for word, want := range map[string]proxy.FairnessFrom{
		"": proxy.FairnessNone, config.FairnessHeader: proxy.FairnessHeader, config.FairnessProxyUser: proxy.FairnessProxyUser, config.FairnessPath: proxy.FairnessPath,
	} {
		if got := proxyFairness(word); got != want {
			t.Errorf("fairness.key: %q is proxy source %d, want %d", word, got, want)
		}
	}
}
