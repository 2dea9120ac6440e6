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
	return usageError{"hookpace ca bundle | ca cert [--config FILE] | ca init --dir DIR"}
}

func caInit(args []string, stdout io.Writer) error {
	fs := newFlags("ca init")
	dir := fs.String("dir", "", "directory for ca.crt and ca.key")
	hosts := fs.String("hosts", "", "comma-separated names the CA may vouch for (names, *.suffix, IPs, CIDRs); empty: unconstrained")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *dir == "" {
		return usageError{"--dir is required"}
	}
	var cert, key string
	var err error
	if *hosts == "" {
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
	if !cfg.MITM.Enabled() && len(cfg.MITMNames()) == 0 {
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
		if out := ca.Uncovered(wanted); len(out) > 0 {
			return fmt.Sprintf("your CA %s cannot vouch for %s: their CONNECTs will pass through unpaced", cfg.MITM.CACert, strings.Join(out, ", "))
		}
		return fmt.Sprintf("your CA %s intercepts every host whose connect is mitm; apps trust %s", cfg.MITM.CACert, bundle)
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
