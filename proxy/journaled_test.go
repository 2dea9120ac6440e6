package proxy

import (
	"sync"

	"github.com/hookpace/hookpace/journal"
	"github.com/hookpace/hookpace/spool"
)

// journals are the journals of the spools openJournaled opened.
var journals sync.Map // *spool.Spool -> *journal.Journal

// openJournaled opens a spool with its journal (default options), as
// hookpace does.
func openJournaled(o spool.Options) (*spool.Spool, error) {
	s, j, err := journal.OpenSpool(o, journal.Options{})
	if err == nil {
		journals.Store(s, j)
	}
	return s, err
}

// journalOf is the journal of a spool openJournaled opened.
func journalOf(s *spool.Spool) *journal.Journal {
	j, _ := journals.Load(s)
	return j.(*journal.Journal)
}
