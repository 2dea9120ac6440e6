package cli

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

func runMain(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestHelpPrintsUsage(t *testing.T) {
	for _, arg := range []string{"--help", "-h", "-help", "help"} {
		code, out, errOut := runMain(arg)
		if code != 0 || !strings.Contains(out, "Usage:") || !strings.Contains(out, "hookpace check-config FILE") {
			t.Errorf("hookpace %s: exit %d, stdout %q, stderr %q; want the usage and exit 0", arg, code, out, errOut)
		}
	}
}

// Every command answers --help with its own usage and its flags, on
// stdout, with exit 0, and does nothing else (status would dial the
// admin API; run would start a proxy).
func TestEverySubcommandHasHelp(t *testing.T) {
	cases := []struct {
		args []string
		want []string // in stdout
	}{
		{[]string{"run", "--help"}, []string{"Usage: hookpace [run]", "-config"}},
		{[]string{"check-config", "-h"}, []string{"Usage: hookpace check-config FILE"}},
		{[]string{"ca", "--help"}, []string{"Usage: hookpace ca bundle", "hookpace ca init --dir DIR", "REQUESTS_CA_BUNDLE"}},
		{[]string{"ca", "init", "--help"}, []string{"hookpace ca init", "-dir"}},
		{[]string{"ca", "bundle", "--help"}, []string{"hookpace ca bundle", "-config"}},
		{[]string{"ca", "cert", "--help"}, []string{"hookpace ca cert", "-config"}},
		{[]string{"status", "--help"}, []string{"Usage: hookpace status", "-json", "-admin"}},
		{[]string{"pause", "--help"}, []string{"Usage: hookpace pause HOST", "-admin"}},
		{[]string{"resume", "-h"}, []string{"Usage: hookpace resume HOST"}},
		{[]string{"health", "--help"}, []string{"Usage: hookpace health", "-ready"}},
		{[]string{"inject", "--help"}, []string{"Usage: hookpace inject", "Example:", "1.29", "-spool-pvc", "-no-trust"}},
		{[]string{"dead", "--help"}, []string{"hookpace dead list", "hookpace dead purge"}},
		{[]string{"dead", "replay", "--help"}, []string{"hookpace dead replay", "-all", "-host"}},
		{[]string{"version", "--help"}, []string{"Usage: hookpace version"}},
		{[]string{"help", "status"}, []string{"Usage: hookpace status"}},
	}
	for _, c := range cases {
		code, out, errOut := runMain(c.args...)
		if code != 0 || errOut != "" {
			t.Errorf("hookpace %s: exit %d, stderr %q; want exit 0 and nothing on stderr", strings.Join(c.args, " "), code, errOut)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("hookpace %s: stdout lacks %q:\n%s", strings.Join(c.args, " "), w, out)
			}
		}
	}
	// Every command in the help table is reachable, and each is listed in
	// the overall usage.
	for cmd := range commandHelp {
		if !strings.Contains(usage, "hookpace "+cmd) && cmd != "run" && cmd != "resume" {
			t.Errorf("usage does not list %q", cmd)
		}
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, _ := runMain(args...)
		if code != 0 {
			t.Fatalf("hookpace %v: exit %d", args, code)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "hookpace ") || !strings.HasPrefix(lines[1], "commit ") ||
			!strings.HasPrefix(lines[2], runtime.Version()+" ") {
			t.Errorf("hookpace %v printed %q; want version, commit and Go version lines", args, out)
		}
	}
	defer func(v, c string) { Version, Commit = v, c }(Version, Commit)
	Version, Commit = "v1.2.3", "abc123"
	if _, out, _ := runMain("version"); !strings.Contains(out, "hookpace v1.2.3\ncommit abc123\n") {
		t.Errorf("with Version and Commit set by the linker, version printed %q", out)
	}
}

func TestUnknownCommandExits2(t *testing.T) {
	code, out, errOut := runMain("frobnicate")
	if code != 2 || out != "" || !strings.Contains(errOut, `unknown command "frobnicate"`) {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestCommandFirst(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"--config f pause h", "pause --config f h"},
		{"--config=f pause h", "pause --config=f h"},
		{"--admin a --token-file t resume h", "resume --admin a --token-file t h"},
		{"--config f", "--config f"},
		{"--config pause", "--config pause"}, // pause is the config's file name
		{"pause --config f h", "pause --config f h"},
		{"--json status", "status --json"},
		{"-- pause", "-- pause"},
		{"--config f notacommand", "--config f notacommand"},
		{"", ""},
	} {
		got := strings.Join(commandFirst(strings.Fields(tc.in)), " ")
		if got != tc.want {
			t.Errorf("commandFirst(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Every command is found after flags given before it ("hookpace --config
// F pause HOST"): it answers --help with its own help, or refuses the
// flag itself; run never answers for it.
func TestCommandAfterFlags(t *testing.T) {
	for _, c := range commands {
		if c.name == "run" || c.name == "help" {
			continue
		}
		code, out, errOut := runMain("--config", "/nonexistent/hookpace.yaml", c.name, "--help")
		own, ok := commandHelp[c.name]
		switch {
		case strings.HasPrefix(out, commandHelp["run"]) || strings.HasPrefix(errOut, "hookpace run:"):
			t.Errorf("hookpace --config F %s --help: run answered (exit %d)", c.name, code)
		case code == 0 && ok && !strings.HasPrefix(out, own):
			t.Errorf("hookpace --config F %s --help printed, not its own help:\n%s", c.name, out)
		case code != 0 && !strings.HasPrefix(errOut, "hookpace "+c.name+": "):
			t.Errorf("hookpace --config F %s --help: exit %d, stderr %q", c.name, code, errOut)
		}
	}
}

// A command with subcommands is found after flags given before it with
// its subcommand: the subcommand answers --help, as it does without the
// flags.
func TestSubcommandAfterFlags(t *testing.T) {
	for _, args := range [][]string{{"ca", "cert"}, {"sign", "public-key"}, {"dead", "list"},
		{"msg", "show"}, {"queue", "list"}} {
		_, want, _ := runMain(append(args, "--help")...)
		code, out, errOut := runMain(append([]string{"--config", "/nonexistent/hookpace.yaml"}, append(args, "--help")...)...)
		if code != 0 || out != want || errOut != "" {
			t.Errorf("hookpace --config F %s --help: exit %d, stderr %q, stdout\n%s\nwant\n%s", strings.Join(args, " "), code, errOut, out, want)
		}
	}
}
