package spool_test

import (
	"testing"

	"github.com/hookpace/hookpace/journal"
	"github.com/hookpace/hookpace/spool"
)

func init() {
	spool.OpenJournaled = func(o spool.Options) (*spool.Spool, spool.PCJournal, error) {
		s, j, err := journal.OpenSpool(o, journal.Options{})
		if err != nil {
			return nil, spool.PCJournal{}, err
		}
		return s, spool.PCJournal{Record: j.RecordAttempt, Lookup: func(r spool.Ref) (string, error) {
			v, err := j.Lookup(r)
			if err != nil {
				return "", err
			}
			return v.State, nil
		}, Reason: func(r spool.Ref) (string, error) {
			v, err := j.Lookup(r)
			if err != nil {
				return "", err
			}
			return v.Entry.Reason, nil
		}}, nil
	}
}

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
