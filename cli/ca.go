package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/mitm"
)

// caCmd is hookpace ca init | bundle | cert.
func caCmd(args []string, stdout io.Writer) error {
	sub := ""
	if len(args) > 0 {
		sub, args = args[0], args[1:]
	}
	switch sub {
	case "init":
		return caInit(args, stdout)
	case "bundle", "cert":
		return caPath(sub, args, stdout)
	}
	return usageError{"hookpace ca bundle | ca cert [--config FILE] | ca init --dir DIR (--hosts NAMES | --unconstrained)"}
}

func caInit(args []string, stdout io.Writer) error {
	fs := newFlags("ca init")
	dir := fs.String("dir", "", "directory for ca.crt and ca.key")
	hosts := fs.String("hosts", "", "comma-separated names the CA may vouch for (names, *.suffix, IPs, CIDRs)")
	open := fs.Bool("unconstrained", false, "a CA without name constraints: its key can impersonate any site and IP to whoever trusts it")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *dir == "" {
		return usageError{"--dir is required"}
	}
	if *hosts == "" && !*open {
		return usageError{"--hosts NAMES is required: the names the CA may vouch for (a leaked key can impersonate nothing else). " +
			"For partners you cannot list, leave mitm.ca_cert out and set defaults.connect: mitm: hookpace's own open-world CA vouches for any DNS name but never an IP or a cluster name. " +
			"--unconstrained makes a CA that vouches for everything"}
	}
	if *hosts != "" && *open {
		return usageError{"--hosts and --unconstrained: choose one"}
	}
	var cert, key string
	var err error
	if *open {
		fmt.Fprintln(stdout, "warning: this CA has no name constraints: whoever holds ca.key can impersonate any site and any IP address to every app that trusts it")
		cert, key, err = mitm.InitCA(*dir)
	} else {
		var names mitm.Names
		if names, err = mitm.ParseNames(strings.Split(*hosts, ",")); err != nil {
			return usageError{"--hosts: " + err.Error()}
		}
		cert, key, err = mitm.InitConstrainedCA(*dir, names)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s and %s (mode 0600)\n", cert, key)
	fmt.Fprintf(stdout, "configure:\n  mitm:\n    ca_cert: %s\n    ca_key: %s\nand have your apps trust %s\n", cert, key, cert)
	return nil
}

// caPath prints the trust bundle's or the CA certificate's path, reading
// only the config and the file system, so that it works while hookpace
// run holds the spool.
func caPath(which string, args []string, stdout io.Writer) error {
	flags := newFlags("ca " + which)
	path := flags.String("config", "", "config file (YAML); $HOOKPACE_CONFIG or the embedded defaults if empty")
	if err := parse(flags, args); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return usageError{"unexpected argument " + flags.Arg(0)}
	}
	if *path == "" {
		*path = os.Getenv("HOOKPACE_CONFIG")
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		return err
	}
	name := mitm.TrustBundle
	if which == "cert" {
		name = mitm.TrustCert
	}
	p := filepath.Join(cfg.TrustDir(), name)
	if !cfg.MITM.Enabled() && !cfg.MITMOpen() && len(cfg.MITMNames()) == 0 {
		return fmt.Errorf("no CA: no host is intercepted. Name your partners under hosts: in the config (connect: mitm is their default), then run hookpace with it: it creates its CA and writes %s", p)
	}
	if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
		run := "hookpace run"
		if *path != "" {
			run += " --config " + *path
		}
		return fmt.Errorf("no CA yet: %s creates it on its first start (in %s) and writes %s", run, cfg.OwnCADir(), p)
	} else if err != nil {
		return err
	}
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	fmt.Fprintln(stdout, p)
	return nil
}

// describeHTTPS says, for check-config, what hookpace does with CONNECT
// under cfg: which CA intercepts which hosts, whether a start will create
// or re-issue it, and what apps then must do.
func describeHTTPS(cfg *config.Config) string {
	bundle := filepath.Join(cfg.TrustDir(), mitm.TrustBundle)
	wanted := cfg.MITMNames()
	if cfg.MITM.Enabled() {
		ca, err := mitm.LoadCA(cfg.MITM.CACert, cfg.MITM.CAKey, 1)
		if err != nil {
			return err.Error() // LoadFiles said so already
		}
		var warn string
		if _, constrained := ca.Names(); !constrained {
			warn = "; WARNING: it has no name constraints: whoever holds its key can impersonate any site and IP address to the apps that trust it (hookpace ca init --hosts makes a constrained one)"
		}
		if out := ca.Uncovered(wanted); len(out) > 0 {
			return fmt.Sprintf("your CA %s cannot vouch for %s: their CONNECTs will pass through unpaced%s", cfg.MITM.CACert, strings.Join(out, ", "), warn)
		}
		return fmt.Sprintf("your CA %s intercepts every host whose connect is mitm; apps trust %s%s", cfg.MITM.CACert, bundle, warn)
	}
	if cfg.MITMOpen() {
		names, err := mitm.OpenNames(cfg.MITM.Exclude)
		if err != nil {
			return err.Error()
		}
		certPath, keyPath := mitm.OwnPaths(cfg.OwnCADir())
		what := fmt.Sprintf("hookpace's open-world CA vouches for %s; leaves are minted on demand, the CA is never re-issued as hosts come and go; "+
			"CONNECTs to an IP or an excluded name pass through unpaced; apps trust %s", names, bundle)
		if _, err := os.Stat(keyPath); errors.Is(err, fs.ErrNotExist) {
			return "a start creates it in " + cfg.OwnCADir() + ": " + what
		}
		if ca, err := mitm.LoadCA(certPath, keyPath, 1); err == nil && !ca.Is(names) {
			return "the next start or reload re-issues the CA in " + cfg.OwnCADir() + " (same key) as the open-world CA, then apps must re-read " + bundle + ": " + what
		}
		if out := mitmUncoveredOpen(names, wanted); len(out) > 0 {
			what += "; hosts it cannot vouch for (their CONNECTs pass through): " + strings.Join(out, ", ")
		}
		return what
	}
	if len(wanted) == 0 {
		return "no host is intercepted (none is named in hosts with connect: mitm): every CONNECT passes through unpaced, counted in hookpace_tunnels_total"
	}
	names, err := mitm.ParseNames(wanted)
	if err != nil {
		return err.Error()
	}
	certPath, keyPath := mitm.OwnPaths(cfg.OwnCADir())
	if _, err := os.Stat(keyPath); errors.Is(err, fs.ErrNotExist) {
		return fmt.Sprintf("hookpace creates its CA for %s on its first start, in %s; apps trust %s", names, cfg.OwnCADir(), bundle)
	}
	ca, err := mitm.LoadCA(certPath, keyPath, 1)
	if err != nil {
		return fmt.Sprintf("hookpace's CA in %s cannot be loaded: %v", cfg.OwnCADir(), err)
	}
	have, _ := ca.Names()
	if missing := have.Missing(names); !missing.Empty() {
		return fmt.Sprintf("hookpace's CA vouches for %s, not %s: the next start or reload re-issues it (same key), "+
			"then apps must re-read %s for the new names (curl reads it on every run, Python requests on every new connection; restart Go, Node and Java apps)",
			have, missing, bundle)
	}
	return fmt.Sprintf("hookpace's CA %s vouches for %s; apps trust %s", certPath, have, bundle)
}

// mitmUncoveredOpen lists the entries an open-world CA under names cannot
// vouch for: IP addresses and excluded names.
func mitmUncoveredOpen(names mitm.Names, entries []string) []string {
	var out []string
	for _, e := range entries {
		host := strings.TrimPrefix(e, "*.")
		if !names.Covers(host) {
			out = append(out, e)
		}
	}
	return out
}
