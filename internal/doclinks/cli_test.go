package doclinks

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookpace/hookpace/cli"
)

var update = flag.Bool("update", false, "rewrite docs/cli.md from the CLI's help")

// cliPage is docs/cli.md: the CLI's own help, command by command, as
// `hookpace help` and `hookpace COMMAND --help` print it.
func cliPage(t *testing.T) string {
	t.Helper()
	help := func(args ...string) string {
		var out, errOut bytes.Buffer
		if code := cli.Main(args, &out, &errOut); code != 0 {
			t.Fatalf("hookpace %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
		}
		return strings.TrimRight(out.String(), "\n")
	}
	var b strings.Builder
	b.WriteString("# CLI\n\nEvery command of `hookpace`, with the help the binary prints (`hookpace\nhelp`, `hookpace help COMMAND`, `hookpace COMMAND --help`). This page is\ngenerated from that help: `go test ./internal/doclinks -run TestCLIPage\n-update` rewrites it, and `go test ./...` fails when it differs.\n\n")
	block := func(s string) { b.WriteString("```text\n" + s + "\n```\n\n") }
	b.WriteString("## hookpace help\n\n")
	block(help("help"))
	for _, c := range cli.Commands() {
		if c.Name == "help" {
			continue // above
		}
		b.WriteString("## hookpace " + c.Name + "\n\n")
		if c.Subs == nil {
			block(help(c.Name, "--help"))
			continue
		}
		group := help("help", c.Name)
		block(group)
		for _, s := range c.Subs {
			text := help(c.Name, s, "--help")
			if i := strings.Index(text, "\nFlags:\n"); i >= 0 {
				b.WriteString("### hookpace " + c.Name + " " + s + "\n\n")
				block(strings.TrimPrefix(text[i:], "\n"))
			}
		}
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}

func TestCLIPage(t *testing.T) {
	want := cliPage(t)
	path := filepath.Join(root, "docs", "cli.md")
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("docs/cli.md differs from the CLI's help: run go test ./internal/doclinks -run TestCLIPage -update")
	}
}
