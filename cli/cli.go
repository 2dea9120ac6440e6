// Package cli implements the hookpace command: run, check-config, ca init,
// and the operator commands (status, pause, resume, dead) that talk to a
// running hookpace through its admin API.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/hookpace/hookpace/admin"
	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/server"
	"github.com/hookpace/hookpace/spool"
)

// usage is usageText with config's default admin address filled in.
var usage = strings.ReplaceAll(usageText, "DEFAULT_ADMIN", config.Default().Admin)

const usageText = `hookpace: a sidecar egress proxy that spools webhooks durably and replays them paced per host.

Usage:
  hookpace [run] [--config FILE]       run the proxy (embedded defaults without --config)
  hookpace check-config FILE           validate a config file (also --config FILE); exit 0 or 1
  hookpace ca bundle [--config FILE]   path of the trust bundle (system roots + hookpace's CA) for apps
  hookpace ca cert [--config FILE]     path of hookpace's CA certificate
  hookpace ca init --dir DIR --hosts N create your own CA instead (DIR/ca.crt, DIR/ca.key)
  hookpace sign public-key --config FILE --host HOST   the whpk_ key partners verify v1a signatures with
  hookpace status [--json] [--fleet]   table of hosts: queued, in flight, rate, held, breaker
  hookpace pause HOST | resume HOST    stop / restart sending to one host
  hookpace health [--ready]            exit 0 if the admin API is healthy (for probes)
  hookpace inject [-f FILE]...         add hookpace as a native sidecar to Kubernetes manifests
  hookpace uninject [-f FILE]...       take out of manifests what inject added
  hookpace check [-f FILE]... [--image IMAGE]   find pods without hookpace, old images, Jobs without hand-off
  hookpace injector --tls-cert F --tls-key F   admission webhook: inject pods labelled hookpace.dev/inject=enabled
  hookpace capture rules --to PORT --exclude-uid UID [--apply]   iptables rules for capture mode
  hookpace dead list [--host H] [--limit N] [--json]
  hookpace dead export [--host H] [ID...]   every dead letter as JSON lines (whole URL, headers, body)
  hookpace dead replay (--all | --host H | ID...)
  hookpace dead purge  (--all | --host H | ID...)
  hookpace msg show ID | msg list [--host H] [--state S] [--since T]   a webhook's history (the journal)
  hookpace queue list|purge|bury --host H [--older-than D] [ID...]     a host's backlog
  hookpace version                     version, commit and Go version
  hookpace help [COMMAND]              this text, or one command's (also COMMAND --help)

The status page is on the admin listener: http://DEFAULT_ADMIN/ by default.
Operator commands find the admin API from --admin ADDR, or from --config FILE
or $HOOKPACE_CONFIG (its admin: setting), or use DEFAULT_ADMIN. They send the
admin token from --token-file FILE, or from the config's admin.token_file.
`

// Main runs the command line and returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch {
		case isHelp(args[0]):
			fmt.Fprint(stdout, usage)
			return 0
		case args[0] == "--version" || args[0] == "-version":
			fmt.Fprint(stdout, versionString())
			return 0
		}
	}
	args = commandFirst(args)
	cmd := "run"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	// "hookpace ca --help", "hookpace dead -h": commands with
	// subcommands answer before looking for one.
	if (cmd == "ca" || cmd == "capture" || cmd == "dead" || cmd == "msg" || cmd == "queue" || cmd == "sign") && len(args) > 0 && isHelp(args[0]) {
		printHelp(stdout, cmd, nil)
		return 0
	}
	var err error
	switch cmd {
	case "run":
		err = run(args, stderr)
	case "check-config":
		err = checkConfig(args, stdout)
	case "ca":
		err = caCmd(args, stdout)
	case "status":
		err = status(args, stdout)
	case "health":
		err = health(args, stdout)
	case "inject":
		err = injectCmd(args, stdout, stderr)
	case "uninject":
		err = uninjectCmd(args, stdout, stderr)
	case "injector":
		err = injectorCmd(args, stderr)
	case "check":
		err = checkCmd(args, stdout)
	case "capture":
		err = captureCmd(args, stdout, stderr)
	case "pause", "resume":
		err = pauseResume(cmd, args, stdout)
	case "dead":
		err = dead(args, stdout)
	case "msg":
		err = msgCmd(args, stdout)
	case "queue":
		err = queueCmd(args, stdout)
	case "sign":
		err = signCmd(args, stdout)
	case "version":
		err = version(args, stdout)
	case "help":
		if len(args) > 0 {
			printHelp(stdout, args[0], nil)
		} else {
			fmt.Fprint(stdout, usage)
		}
		return 0
	default:
		fmt.Fprintf(stderr, "hookpace: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	var he helpError
	if errors.As(err, &he) {
		printHelp(stdout, cmd, he.fs)
		return 0
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "hookpace %s: %s\n\n%s", cmd, ue.msg, usage)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "hookpace %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

// commands are the command names Main knows.
var commands = map[string]bool{"run": true, "check-config": true, "ca": true, "status": true, "health": true,
	"inject": true, "uninject": true, "injector": true, "check": true, "pause": true, "resume": true, "dead": true, "msg": true, "queue": true, "version": true, "help": true}

// valueFlags are the flags given before a command that take a value as
// the next argument ("--config F pause HOST").
var valueFlags = map[string]bool{"config": true, "admin": true, "token-file": true}

// commandFirst moves a command named after leading flags to the front, so
// that "hookpace --config F pause HOST" is "hookpace pause --config F
// HOST": every command parses its flags wherever they stand. Arguments
// with no command among them are left as they are (run's flags).
func commandFirst(args []string) []string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return args
		}
		if name, ok := strings.CutPrefix(a, "-"); ok {
			name = strings.TrimPrefix(name, "-")
			if valueFlags[name] {
				i++ // its value
			}
			continue
		}
		if i == 0 || !commands[a] {
			return args
		}
		out := append([]string{a}, args[:i]...)
		return append(out, args[i+1:]...)
	}
	return args
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parse parses flags wherever they stand among the arguments, so that
// "hookpace pause HOST --admin ADDR" works like "--admin ADDR HOST".
// Positional arguments are left in fs.Args().
func parse(fs *flag.FlagSet, args []string) error {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return helpError{fs}
			}
			return usageError{err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		if args[0] == "--" {
			positional = append(positional, args[1:]...)
			break
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
	return fs.Parse(append([]string{"--"}, positional...))
}

func loadConfig(path string) (*config.Config, error) {
	if path == "" {
		return config.Default(), nil
	}
	return config.Load(path)
}

func run(args []string, stderr io.Writer) error {
	fs := newFlags("run")
	path := fs.String("config", "", "config file (YAML); embedded defaults if empty")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{"unexpected argument " + fs.Arg(0)}
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		return err
	}

	// SIGTERM/SIGINT start a graceful shutdown; a second one forces exit.
	// SIGHUP reloads the config.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	term := make(chan os.Signal, 2)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	reload := make(chan struct{}, 1)
	go func() {
		for range hup {
			select {
			case reload <- struct{}{}:
			default:
			}
		}
	}()
	go func() {
		<-term
		cancel()
		<-term
		fmt.Fprintln(stderr, "hookpace: second signal, exiting now; queued messages stay in the spool")
		os.Exit(1)
	}()
	return server.Run(ctx, server.Options{Config: cfg, Reload: reload})
}

func checkConfig(args []string, stdout io.Writer) error {
	fs := newFlags("check-config")
	// --config FILE as for run, or the file on its own.
	flagPath := fs.String("config", "", "config file")
	if err := parse(fs, args); err != nil {
		return err
	}
	path := fs.Arg(0)
	if *flagPath != "" {
		if path != "" && path != *flagPath {
			return usageError{"two files given: hookpace check-config FILE"}
		}
		path = *flagPath
	}
	if path == "" {
		return usageError{"which file? hookpace check-config FILE"}
	}
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	// Every file that run loads, loaded as run loads it.
	if _, err := server.LoadFiles(cfg); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: ok (%d hosts, listen %s, admin %s)\n", path, len(cfg.Hosts), cfg.Listen, cfg.Admin)
	fmt.Fprintf(stdout, "https: %s\n", describeHTTPS(cfg))
	printRewrites(stdout, cfg)
	fmt.Fprintf(stdout, "webhooks: %s\n", describeWebhooks(cfg))
	printInbound(stdout, cfg)
	fmt.Fprintf(stdout, "journal: %s\n", describeJournal(cfg))
	if w := captureUncovered(cfg); w != "" {
		fmt.Fprintf(stdout, "WARNING: %s\n", w)
	}
	for _, w := range append(cfg.PlainTokenURLs(), cfg.InboundWarnings()...) {
		fmt.Fprintf(stdout, "WARNING: %s\n", w)
	}
	return nil
}

// describeJournal says, for check-config, which of journal.max_bytes and
// journal.retain binds: the rate above which max_bytes removes entries
// before retain would, at spool.NominalEntryBytes an entry. The status
// page says which binds at the rate and size the journal measures.
func describeJournal(cfg *config.Config) string {
	j := cfg.Journal
	if j.Off {
		return "off"
	}
	maxBytes := int64(j.MaxBytes)
	if maxBytes == 0 {
		maxBytes = int64(cfg.Spool.MaxBytes) / 4
	}
	entries := maxBytes / spool.NominalEntryBytes
	rate := float64(entries) / j.Retain.D().Seconds()
	return fmt.Sprintf("max_bytes %s holds about %d entries at ~%d B each; retain %s binds below %.2f webhooks/s, max_bytes above "+
		"(the status page and /v1/spool say which binds at the measured rate)", admin.BytesText(maxBytes), entries,
		spool.NominalEntryBytes, j.Retain.D(), rate)
}
