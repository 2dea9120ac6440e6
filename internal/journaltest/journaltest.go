// Package journaltest opens spools with their journals for the tests of
// the packages above them, as hookpace does, and finds a spool's journal
// again.
package journaltest

import (
	"sync"

	"github.com/hookpace/hookpace/journal"
	"github.com/hookpace/hookpace/spool"
)

// journals are the journals of the spools Open and OpenWith opened.
var journals sync.Map // *spool.Spool -> *journal.Journal

// Open opens a spool with its journal at the journal's default options.
func Open(o spool.Options) (*spool.Spool, error) {
	return OpenWith(o, journal.Options{})
}

// OpenWith is Open with the journal's options o.
func OpenWith(so spool.Options, o journal.Options) (*spool.Spool, error) {
	s, j, err := journal.OpenSpool(so, o)
	if err == nil {
		journals.Store(s, j)
	}
	return s, err
}

// Of is the journal of a spool Open or OpenWith opened.
func Of(s *spool.Spool) *journal.Journal {
	j, _ := journals.Load(s)
	return j.(*journal.Journal)
}
