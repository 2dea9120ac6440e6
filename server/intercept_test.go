package server

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/mitm"
)

// TestInterceptWarnsOfUnconstrainedCA: an operator's CA without name
// constraints is warned of when hookpace takes it up; one made with
// --hosts is not.
func TestInterceptWarnsOfUnconstrainedCA(t *testing.T) {
	for _, tc := range []struct {
		hosts []string
		warn  bool
	}{{nil, true}, {[]string{"partner.example"}, false}} {
		dir := filepath.Join(t.TempDir(), "ca")
		var certPath, keyPath string
		var err error
		if tc.hosts == nil {
			certPath, keyPath, err = mitm.InitCA(dir)
		} else {
			names, _ := mitm.ParseNames(tc.hosts)
			certPath, keyPath, err = mitm.InitConstrainedCA(dir, names)
		}
		if err != nil {
			t.Fatal(err)
		}
		ca, err := mitm.LoadCA(certPath, keyPath, 10)
		if err != nil {
			t.Fatal(err)
		}
		cfg := config.Default()
		cfg.Spool.Dir = t.TempDir()
		cfg.MITM.CACert, cfg.MITM.CAKey = certPath, keyPath
		var log bytes.Buffer
		ic := &intercept{log: slog.New(slog.NewTextHandler(&log, nil))}
		if _, err := ic.apply(cfg, ca); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(log.String(), "has no name constraints"); got != tc.warn {
			t.Errorf("hosts %v: warned %v, want %v\n%s", tc.hosts, got, tc.warn, log.String())
		}
	}
}

// TestInterceptOpenWorldKeepsItsCA: the open-world CA in force is kept,
// the same object and bytes, whatever hosts a reload names.
func TestInterceptOpenWorldKeepsItsCA(t *testing.T) {
	dir := t.TempDir()
	parse := func(yaml string) *config.Config {
		cfg, err := config.Parse("config.yaml", []byte("spool: {dir: "+dir+"}\ndefaults: {connect: mitm}\n"+yaml))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	var log bytes.Buffer
	ic := &intercept{log: slog.New(slog.NewTextHandler(&log, nil))}
	if _, err := ic.apply(parse(""), nil); err != nil {
		t.Fatal(err)
	}
	first := ic.CA()
	if first == nil || !first.Covers("p1.partner.test") || first.Covers("10.0.0.1") {
		t.Fatal("no open-world CA")
	}
	changed, err := ic.apply(parse("hosts:\n  late.test: {rate: 1/s}\n  10.0.0.1: {}\n"), nil)
	if err != nil || changed || ic.CA() != first {
		t.Fatalf("a reload naming hosts: changed %v, %v", changed, err)
	}
	if !strings.Contains(log.String(), "cannot vouch for these hosts") || !strings.Contains(log.String(), "10.0.0.1") {
		t.Errorf("no warning for a named IP host:\n%s", log.String())
	}
	if strings.Contains(log.String(), "re-issued") {
		t.Errorf("the CA was re-issued:\n%s", log.String())
	}
}
