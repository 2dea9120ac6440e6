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

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/server"
)

// usage is the overall help: what commands lists, config's default
// admin address filled in. init sets it: the help command prints it.
var usage string

func init() { usage = strings.ReplaceAll(usageText(), "DEFAULT_ADMIN", config.Default().Admin) }

// command is one of hookpace's commands: the lines the overall help
// gives it, its subcommands ("CMD --help" then answers before one is
// looked for), and what runs it.
type command struct {
	name  string
	usage []string
	subs  []string
	do    func(cmd string, args []string, stdout, stderr io.Writer) error
}

// commands are hookpace's commands, in the order the help lists them:
// Main, the help and commandFirst read this list, and no other.
var commands = []command{
	{"run", []string{"[run] [--config FILE]       run the proxy (embedded defaults without --config)"}, nil,
		func(_ string, args []string, _, stderr io.Writer) error { return run(args, stderr) }},
	{"check-config", []string{"check-config FILE           validate a config file (also --config FILE); exit 0 or 1"}, nil,
		func(_ string, args []string, stdout, _ io.Writer) error { return checkConfig(args, stdout) }},
	{"ca", []string{
		"ca bundle [--config FILE]   path of the trust bundle (system roots + hookpace's CA) for apps",
		"ca cert [--config FILE]     path of hookpace's CA certificate",
		"ca init --dir DIR --hosts N create your own CA instead (DIR/ca.crt, DIR/ca.key)"}, []string{"bundle", "cert", "init"},
		func(_ string, args []string, stdout, _ io.Writer) error { return caCmd(args, stdout) }},
	{"sign", []string{"sign public-key --config FILE --host HOST   the whpk_ key partners verify v1a signatures with"}, []string{"public-key"},
		func(_ string, args []string, stdout, _ io.Writer) error { return signCmd(args, stdout) }},
	{"status", []string{"status [--json] [--fleet]   table of hosts: queued, in flight, rate, held, breaker"}, nil,
		func(_ string, args []string, stdout, _ io.Writer) error { return status(args, stdout) }},
	{"pause", []string{"pause HOST | resume HOST    stop / restart sending to one host"}, nil, pauseResumeCmd},
	{"resume", nil, nil, pauseResumeCmd},
	{"health", []string{"health [--ready]            exit 0 if the admin API is healthy (for probes)"}, nil,
		func(_ string, args []string, stdout, _ io.Writer) error { return health(args, stdout) }},
	{"inject", []string{"inject [-f FILE]...         add hookpace as a native sidecar to Kubernetes manifests"}, nil,
		func(_ string, args []string, stdout, stderr io.Writer) error { return injectCmd(args, stdout, stderr) }},
	{"uninject", []string{"uninject [-f FILE]...       take out of manifests what inject added"}, nil,
		func(_ string, args []string, stdout, stderr io.Writer) error {
			return uninjectCmd(args, stdout, stderr)
		}},
	{"check", []string{"check [-f FILE]... [--image IMAGE]   find pods without hookpace, old images, Jobs without hand-off"}, nil,
		func(_ string, args []string, stdout, _ io.Writer) error { return checkCmd(args, stdout) }},
	{"injector", []string{"injector --tls-cert F --tls-key F   admission webhook: inject pods labelled hookpace.dev/inject=enabled"}, nil,
		func(_ string, args []string, _, stderr io.Writer) error { return injectorCmd(args, stderr) }},
	{"capture", []string{"capture rules --to PORT --exclude-uid UID [--apply]   iptables rules for capture mode"}, []string{"rules"},
		func(_ string, args []string, stdout, stderr io.Writer) error { return captureCmd(args, stdout, stderr) }},
	{"dead", []string{
		"dead list [--host H] [--limit N] [--json]",
		"dead export [--host H] [ID...]   every dead letter as JSON lines (whole URL, headers, body)",
		"dead replay (--all | --host H | ID...)",
		"dead purge  (--all | --host H | ID...)"}, []string{"list", "export", "replay", "purge"},
		func(_ string, args []string, stdout, _ io.Writer) error { return dead(args, stdout) }},
	{"msg", []string{"msg show ID | msg list [--host H] [--state S] [--since T]   a webhook's history (the journal)"}, []string{"show", "list", "resend"},
		func(_ string, args []string, stdout, _ io.Writer) error { return msgCmd(args, stdout) }},
	{"queue", []string{"queue list|purge|bury --host H [--older-than D] [ID...]     a host's backlog"}, []string{"list", "purge", "bury"},
		func(_ string, args []string, stdout, _ io.Writer) error { return queueCmd(args, stdout) }},
	{"version", []string{"version                     version, commit and Go version"}, nil,
		func(_ string, args []string, stdout, _ io.Writer) error { return version(args, stdout) }},
	{"help", []string{"help [COMMAND]              this text, or one command's (also COMMAND --help)"}, nil,
		func(_ string, args []string, stdout, _ io.Writer) error {
			if len(args) > 0 {
				printHelp(stdout, args[0], nil)
			} else {
				fmt.Fprint(stdout, usage)
			}
			return nil
		}},
}

func pauseResumeCmd(cmd string, args []string, stdout, _ io.Writer) error {
	return pauseResume(cmd, args, stdout)
}

// Command names one of hookpace's commands and its subcommands.
type Command struct {
	Name string
	Subs []string
}

// Commands are hookpace's commands, in the order the help lists them,
// with their subcommands: what the CLI's reference page is made of.
func Commands() []Command {
	out := make([]Command, len(commands))
	for i, c := range commands {
		out[i] = Command{c.name, c.subs}
	}
	return out
}

// lookup is the command named name, nil if there is none.
func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

// usageText is the overall help, with DEFAULT_ADMIN for the admin
// address.
func usageText() string {
	var b strings.Builder
	b.WriteString("hookpace: a sidecar egress proxy that spools webhooks durably and replays them paced per host.\n\nUsage:\n")
	for _, c := range commands {
		for _, l := range c.usage {
			b.WriteString("  hookpace " + l + "\n")
		}
	}
	b.WriteString(`
The status page is on the admin listener: http://DEFAULT_ADMIN/ by default.
Operator commands find the admin API from --admin ADDR, or from --config FILE
or $HOOKPACE_CONFIG (its admin: setting), or use DEFAULT_ADMIN. They send the
admin token from --token-file FILE, or from the config's admin.token_file.
`)
	return b.String()
}

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
	c := lookup(cmd)
	if c == nil {
		fmt.Fprintf(stderr, "hookpace: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	// "hookpace ca --help", "hookpace dead -h": commands with
	// subcommands answer before looking for one.
	if len(c.subs) > 0 && len(args) > 0 && isHelp(args[0]) {
		printHelp(stdout, cmd, nil)
		return 0
	}
	err := c.do(cmd, args, stdout, stderr)
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

// valueFlags are the flags given before a command that take a value as
// the next argument ("--config F pause HOST").
var valueFlags = map[string]bool{"config": true, "admin": true, "token-file": true}

// commandFirst moves a command named after leading flags to the front,
// with its subcommand if it has one, so that "hookpace --config F pause
// HOST" is "hookpace pause --config F HOST" and "hookpace --admin A dead
// list" is "hookpace dead list --admin A": every command parses its flags
// wherever they stand after its subcommand. Arguments with no command
// among them are left as they are (run's flags).
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
		c := lookup(a)
		if i == 0 || c == nil {
			return args
		}
		out, rest := []string{a}, args[i+1:]
		if len(c.subs) > 0 && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
			out, rest = append(out, rest[0]), rest[1:] // its subcommand stays next to it
		}
		out = append(out, args[:i]...)
		return append(out, rest...)
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
