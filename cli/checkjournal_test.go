package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// check-config says the rate above which journal.max_bytes, not retain,
// ends an entry's stay.
func TestCheckConfigSaysWhichJournalLimitBinds(t *testing.T) {
	for _, c := range []struct{ journal, want string }{
		{"", "max_bytes 256.0 MiB holds about 454975 entries at ~590 B each; retain 336h0m0s binds below 0.38 webhooks/s"},
		{"journal: {max_bytes: 1GiB, retain: 24h}\n", "max_bytes 1.0 GiB holds about 1819901 entries at ~590 B each; retain 24h0m0s binds below 21.06 webhooks/s"},
		{"journal: {off: true}\n", "journal: off\n"},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(path, []byte("spool: {dir: "+filepath.Join(dir, "spool")+"}\n"+c.journal), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runMain("check-config", path)
		if code != 0 || !strings.Contains(out, c.want) {
			t.Errorf("%q: exit %d, lacks %q:\n%s%s", c.journal, code, c.want, out, errOut)
		}
	}
}
