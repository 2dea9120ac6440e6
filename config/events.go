package config

import (
	"fmt"
	"net/url"
	"time"

	"github.com/hookpace/hookpace/hostname"
	"gopkg.in/yaml.v3"
)

// EventsConfig is where hookpace sends its own operational events (issue
// 32): a webhook died, a breaker opened or closed, a host was held longer
// than HeldAfter or paused itself, the spool crossed its watermarks, a
// hand-off ended. They are webhooks like any other, spooled and paced as
// the events URL's host is.
//
//	events:
//	  url: https://ops.example.com/hookpace
//	  sign: {scheme: standard-webhooks, secret_file: /run/secrets/ops-whsec}
//	  held_after: 5m
//
// events.sign is the events host's sign block: resolve gives that host a
// hosts entry of its own (its settings otherwise as Lookup resolved them)
// with this block, so that its deliveries are signed as any host's are.
type EventsConfig struct {
	URL       string   // "" = no events
	Host      string   // URL's queue key, as proxy.HostKey writes it
	HeldAfter Duration // a host held (429, quota, DNS) longer than this is reported
}

// Enabled reports whether events are sent.
func (e EventsConfig) Enabled() bool { return e.URL != "" }

type rawEvents struct {
	URL       opt[string]   `yaml:"url"`
	Sign      yaml.Node     `yaml:"sign"` // see resolveSign
	HeldAfter opt[Duration] `yaml:"held_after"`
}

func defaultEvents() EventsConfig {
	return EventsConfig{HeldAfter: Duration(5 * time.Minute)}
}

// resolveEvents resolves the events block over c, whose hosts are already
// resolved: events.sign becomes the sign block of the events host.
func resolveEvents(p *problems, r *rawEvents, c *Config) {
	e := &c.Events
	field(p, "events.held_after", r.HeldAfter, &e.HeldAfter, positive)
	if !field(p, "events.url", r.URL, &e.URL, checkEventsURL) {
		if n := deref(&r.Sign); n.Kind != 0 && r.URL.Err == nil && !r.URL.Set {
			p.add(n.Line, "events.sign", "needs events.url")
		}
		return
	}
	u, _ := url.Parse(e.URL)
	e.Host = hostname.Key(u)
	n := deref(&r.Sign)
	if n.Kind == 0 {
		return
	}
	key, hc := c.Lookup(e.Host)
	sc := resolveSign(p, "events.sign", n, hc.Sign)
	if hc.Sign != nil && hc.Sign != c.Defaults.Sign && hc.Sign != sc {
		p.add(n.Line, "events.sign", "hosts[%q] has a sign block for %s already: set one of them", key, e.Host)
		return
	}
	hc.Sign = sc
	c.Hosts[e.Host] = hc
	c.hosts = newHostIndex(c.Hosts)
}

// checkEventsURL accepts an absolute http or https URL with a host.
func checkEventsURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("not a URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("want an absolute http:// or https:// URL, got %q", s)
	case u.Hostname() == "":
		return fmt.Errorf("no host in %q", s)
	}
	return nil
}

// eventsRestart names the events settings a reload can't apply.
func eventsRestart(old, new EventsConfig) []string {
	if old != new {
		return []string{"events"}
	}
	return nil
}
