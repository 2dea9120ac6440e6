package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookpace/hookpace/mitm"
)

// TestCAInitNeedsHostsOrUnconstrained: ca init makes an unconstrained CA
// only when told so explicitly, and says what it is.
func TestCAInitNeedsHostsOrUnconstrained(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	var out bytes.Buffer
	err := caInit([]string{"--dir", dir}, &out)
	if err == nil || !strings.Contains(err.Error(), "--hosts NAMES is required") {
		t.Fatalf("ca init without --hosts: %v", err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatal("ca init without --hosts wrote a CA")
	}
	if err := caInit([]string{"--dir", dir, "--hosts", "a.example", "--unconstrained"}, &out); err == nil {
		t.Fatal("ca init took --hosts and --unconstrained together")
	}
	if err := caInit([]string{"--dir", dir, "--unconstrained"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "warning: this CA has no name constraints") {
		t.Errorf("ca init --unconstrained said: %s", out.String())
	}
	ca, err := mitm.LoadCA(filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key"), 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, constrained := ca.Names(); constrained {
		t.Error("the --unconstrained CA has name constraints")
	}
	dir2 := filepath.Join(t.TempDir(), "ca")
	if err := caInit([]string{"--dir", dir2, "--hosts", "a.example"}, &out); err != nil {
		t.Fatal(err)
	}
	ca, err = mitm.LoadCA(filepath.Join(dir2, "ca.crt"), filepath.Join(dir2, "ca.key"), 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, constrained := ca.Names(); !constrained || !ca.Covers("a.example") || ca.Covers("b.example") {
		t.Error("the --hosts CA is not constrained to its host")
	}
}
