package spool

// KeptSynced is testKeptSynced, for the journal's run of it
// (durable_journal_linux_test.go).
var KeptSynced = testKeptSynced

// PCJournal is what the power-cut and unreadable-record tests ask of a
// journal: to record an attempt, and the state and reason a lookup says.
type PCJournal struct {
	Record func(m *Message, a Attempt)
	Lookup func(r Ref) (state string, err error)
	Reason func(r Ref) (reason string, err error)
}

// OpenJournaled opens the spool of o with its journal, for the power-cut
// runs with it on: set by the external test package, which imports the
// journal (durable_journal_linux_test.go).
var OpenJournaled func(o Options) (*Spool, PCJournal, error)
