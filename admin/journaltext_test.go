package admin

import (
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/journal"
)

// The status page's journal line says when max_bytes, not retain, ends an
// entry's stay, from what journal.Usage measured.
func TestJournalTextSaysWhenTheCapBinds(t *testing.T) {
	u := journal.Usage{Entries: 1000, Bytes: 600_000, MaxBytes: 256 << 20, Retain: 14 * 24 * time.Hour}
	u.Rate, u.BytesPerEntry = 2, 600
	u.Holds, u.Binds = journal.BindingLimit(u.MaxBytes, u.Retain, u.BytesPerEntry, u.Rate)
	got := journalText(u)
	if !strings.Contains(got, "max_bytes binds: about 62h8m0s kept at 2.00 webhooks/s") {
		t.Errorf("at 2/s: %q", got)
	}
	u.Rate = 0.1
	u.Holds, u.Binds = journal.BindingLimit(u.MaxBytes, u.Retain, u.BytesPerEntry, u.Rate)
	if got := journalText(u); strings.Contains(got, "binds") || u.Binds != "retain" {
		t.Errorf("at 0.1/s: %q (%s)", got, u.Binds)
	}
}
