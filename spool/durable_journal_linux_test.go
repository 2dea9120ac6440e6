package spool_test

import (
	"testing"

	"github.com/hookpace/hookpace/journal"
	"github.com/hookpace/hookpace/spool"
)

// Dead letters and the journal's entries of their outcomes are on disk
// once the writer and the journal have said so (KeptSynced).
func TestDeadLettersAndJournalEntriesAreSyncedWhenAcknowledged(t *testing.T) {
	spool.KeptSynced(t, func(o spool.Options) (*spool.Spool, func()) {
		s, j, err := journal.OpenSpool(o, journal.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s, j.Sync
	})
}
