package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// check-config prints the rules in force per host, inherited ones too.
func TestCheckConfigPrintsRewrites(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	cfg := "spool: {dir: " + filepath.Join(dir, "spool") + "}\n" +
		"defaults:\n  rewrite: {headers: {set: {X-Sent-By: hookpace}}}\n" +
		"hosts:\n  partner.example:\n    rewrite: {headers: {remove: [X-Internal-Trace]}, json: {drop: [\"$.customer.email\"], mask: [\"$.card.number\"]}}\n" +
		"  off.example:\n    rewrite: {headers: {}}\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runMain("check-config", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"rewrite defaults: headers set X-Sent-By: hookpace\n",
		"rewrite partner.example: headers remove X-Internal-Trace; json drop $.customer.email; json mask $.card.number\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "rewrite off.example") {
		t.Errorf("a host with its rules off is listed:\n%s", out)
	}
}
