package admin

import "github.com/hookpace/hookpace/internal/journaltest"

// openJournaled opens a spool with its journal, as hookpace does;
// journalOf finds that journal again.
var (
	openJournaled = journaltest.Open
	journalOf     = journaltest.Of
)
