package config

import (
	"strings"
	"testing"
	"time"
)

func TestEventsConfig(t *testing.T) {
	c := mustParse(t, "")
	if c.Events.Enabled() || c.Events.HeldAfter.D() != 5*time.Minute {
		t.Fatalf("defaults: %+v", c.Events)
	}
	c = mustParse(t, `
events:
  url: https://Ops.Example.com:443/hookpace?token=x
  held_after: 90s
  sign: {scheme: standard-webhooks, secret_env: OPS_WHSEC}
hosts:
  "*.example.com": {rate: 2/s}
`)
	e := c.Events
	if !e.Enabled() || e.Host != "ops.example.com" || e.HeldAfter.D() != 90*time.Second {
		t.Fatalf("events: %+v", e)
	}
	key, hc := c.Lookup("ops.example.com")
	if key != "ops.example.com" || hc.Sign == nil || hc.Sign.Field != "events.sign" || hc.Rate.Count != 2 {
		t.Fatalf("the events host's entry: %q %+v (sign %+v)", key, hc, hc.Sign)
	}
	if _, other := c.Lookup("api.example.com"); other.Sign != nil {
		t.Errorf("another host is signed with events.sign: %+v", other.Sign)
	}
	// events.sign: {scheme: none} turns off the defaults' signing for
	// the events host alone.
	c = mustParse(t, `
defaults: {sign: {scheme: standard-webhooks, secret_env: X}}
events: {url: "http://127.0.0.1:9999/e", sign: {scheme: none}}
`)
	if _, hc := c.Lookup("127.0.0.1:9999"); c.Events.Host != "127.0.0.1:9999" || hc.Sign != nil {
		t.Errorf("events host %q signed %+v, want unsigned", c.Events.Host, hc.Sign)
	}
	if _, hc := c.Lookup("other.example"); hc.Sign == nil {
		t.Error("defaults.sign lost for other hosts")
	}
}

func TestEventsConfigErrors(t *testing.T) {
	for _, bad := range []struct{ yaml, want string }{
		{"events: {url: ops.example.com/x}\n", "events.url"},
		{"events: {url: \"ftp://ops.example.com/x\"}\n", "events.url"},
		{"events: {url: \"https:///x\"}\n", "events.url"},
		{"events: {url: \"https://ops.example/x\", held_after: 0s}\n", "events.held_after"},
		{"events: {sign: {scheme: none}}\n", "events.sign: needs events.url"},
		{"events: {url: \"https://ops.example/x\", colour: red}\n", "colour"},
		{"events: {url: \"https://ops.example/x\", sign: {scheme: rot13}}\n", "events.sign.scheme"},
		{`events: {url: "https://ops.example/x", sign: {scheme: hmac-sha256, header: X-Sig, secret_env: A}}
hosts:
  ops.example: {sign: {scheme: standard-webhooks, secret_env: B}}
`, "set one of them"},
	} {
		_, err := Parse("test.yaml", []byte(bad.yaml))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v; want an error with %q", bad.yaml, err, bad.want)
		}
	}
}

func TestEventsRestartRequired(t *testing.T) {
	a := mustParse(t, "events: {url: \"https://ops.example/x\"}\n")
	b := mustParse(t, "events: {url: \"https://ops.example/y\"}\n")
	if got := RestartRequired(a, b); len(got) != 1 || got[0] != "events" {
		t.Errorf("RestartRequired = %v, want [events]", got)
	}
	if got := RestartRequired(a, a); len(got) != 0 {
		t.Errorf("RestartRequired(same) = %v", got)
	}
}
