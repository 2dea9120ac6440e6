package config

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// ShutdownConfig bounds graceful shutdown. On SIGTERM hookpace refuses new
// webhooks (503), keeps delivering for Drain, hands what is still queued
// to Handoff (another hookpace's proxy listener), and closes the spool;
// Timeout bounds all of it.
type ShutdownConfig struct {
	Timeout     Duration // bound for the whole stop: in-flight deliveries, drain, hand-off
	Drain       Duration // keep delivering this long after SIGTERM; 0 = stop at once; default Timeout - DrainRoom, 0 with a hand-off
	Handoff     string   // URL of another hookpace's proxy listener; "" = no hand-off
	HandoffAuth string   // path of a file holding "username:password" for Handoff
	// HandoffSecret is the path of a file holding the secret that
	// authenticates hand-offs: the sender signs each with it, and a
	// receiving hookpace keeps a handed-off webhook's id only when the
	// signature checks. Both ends configure the same one; "" = none.
	HandoffSecret string
}

// DrainRoom is what a drain left unset leaves of shutdown.timeout: without
// a hand-off, the drain defaults to the timeout less this (20 s of the
// default 30 s; none with a timeout of 10 s or less), so that a sidecar
// delivers what it can before its emptyDir goes, and the attempts in
// flight and closing the spool keep their time. With a hand-off it
// defaults to 0: the other hookpace takes what is queued at once.
const DrainRoom = 10 * time.Second

// HandoffMinRoom is the least of shutdown.timeout that shutdown.drain must
// leave for the hand-off when one is configured.
const HandoffMinRoom = 5 * time.Second

type rawShutdown struct {
	Timeout     opt[Duration] `yaml:"timeout"`
	Drain       opt[Duration] `yaml:"drain"`
	Handoff     opt[string]   `yaml:"handoff"`
	HandoffAuth opt[string]   `yaml:"handoff_auth_file"`
	Secret      opt[string]   `yaml:"handoff_secret_file"`
}

func resolveShutdown(p *problems, r *rawShutdown, s *ShutdownConfig) {
	field(p, "shutdown.timeout", r.Timeout, &s.Timeout, positive)
	field(p, "shutdown.drain", r.Drain, &s.Drain, nonNegative)
	field(p, "shutdown.handoff", r.Handoff, &s.Handoff, checkHandoffURL)
	if !r.Drain.Set {
		s.Drain = 0 // a hand-off takes what is queued at once
		if s.Handoff == "" {
			s.Drain = max(s.Timeout-Duration(DrainRoom), 0)
		}
	}
	field(p, "shutdown.handoff_auth_file", r.HandoffAuth, &s.HandoffAuth, nonEmpty)
	if s.HandoffAuth != "" {
		switch {
		case s.Handoff == "":
			p.add(r.HandoffAuth.Line, "shutdown.handoff_auth_file", "set without shutdown.handoff")
		case strings.Contains(s.Handoff, "@"):
			p.add(r.HandoffAuth.Line, "shutdown.handoff_auth_file", "set as well as credentials in shutdown.handoff: give one")
		}
	}
	// Also without shutdown.handoff: a hookpace that receives hand-offs
	// checks them with it.
	field(p, "shutdown.handoff_secret_file", r.Secret, &s.HandoffSecret, nonEmpty)
	line := firstLine(r.Drain.Line, r.Timeout.Line)
	switch {
	case s.Handoff != "" && s.Timeout-s.Drain < Duration(HandoffMinRoom):
		p.add(line, "shutdown.drain", "%s leaves %s of shutdown.timeout (%s) for the hand-off; it needs at least %s",
			s.Drain, max(s.Timeout-s.Drain, 0), s.Timeout, HandoffMinRoom)
	case s.Drain > s.Timeout:
		p.add(line, "shutdown.drain", "%s is longer than shutdown.timeout (%s), which bounds the whole stop", s.Drain, s.Timeout)
	}
}

func nonNegative(d Duration) error {
	if d < 0 {
		return fmt.Errorf("must not be negative, got %s", d)
	}
	return nil
}

// checkHandoffURL accepts http://[user:password@]host:port of a hookpace
// proxy listener, with no path beyond "/", or "" for none.
func checkHandoffURL(s string) error {
	if s == "" {
		return nil // no hand-off
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("malformed URL %q", s)
	}
	switch {
	case u.Scheme != "http":
		return fmt.Errorf("want http://host:port of a hookpace proxy listener, got scheme %q", u.Scheme)
	case u.Hostname() == "":
		return fmt.Errorf("no host in %q", redactURL(u))
	case u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("want http://host:port without a path, got %q", redactURL(u))
	}
	if u.Port() != "" {
		if err := checkPort(u.Port(), false); err != nil {
			return err
		}
	}
	if u.User != nil {
		if pw, ok := u.User.Password(); u.User.Username() == "" || !ok || pw == "" {
			return fmt.Errorf("credentials in %q: want user:password@", redactURL(u))
		}
	}
	return nil
}

func redactURL(u *url.URL) string { return u.Redacted() }
