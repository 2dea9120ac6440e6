package journal

import (
	"log/slog"
	"sync"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/hookpace/hookpace/spool"
)

// OpenSpool opens the spool of so with its journal: the journal is the
// spool's History (spool.Options.History), opened by spool.Open before
// the spool takes a write, and closed by the spool's Close.
func OpenSpool(so spool.Options, o Options) (*spool.Spool, *Journal, error) {
	j := &Journal{opts: o, log: so.Logger, now: so.Now}
	if j.log == nil {
		j.log = slog.Default()
	}
	if j.now == nil {
		j.now = time.Now
	}
	so.History = j.open
	s, err := spool.Open(so)
	if err != nil {
		return nil, nil, err
	}
	return s, j, nil
}

// open is spool.Options.History: it reads what the journal holds and
// starts its writer. With the journal off, the spool keeps no history.
func (j *Journal) open(s *spool.Spool, kept *badger.DB, mu *sync.Mutex) (spool.History, error) {
	j.st, j.kept, j.mu, j.instance = s, kept, mu, s.Instance()
	j.cond, j.done = sync.NewCond(mu), make(chan struct{})
	j.sweepStop, j.sweepDone = make(chan struct{}), make(chan struct{})
	j.opts.setDefaults(s.Usage().MaxBytes)
	if j.opts.Off {
		return nil, nil
	}
	if err := j.openJournal(); err != nil {
		return nil, err
	}
	go j.journalLoop()
	go j.sweepLoop()
	return j, nil
}

// Close makes what the journal holds durable and stops it (spool.History:
// the spool's Close calls it once its writer has stopped).
func (j *Journal) Close() {
	close(j.sweepStop)
	<-j.sweepDone // a sweep in progress writes the kept database, which closes next
	j.closeJournal()
}

// sweepLoop runs SweepJournal every sweepEvery, until Close.
func (j *Journal) sweepLoop() {
	defer close(j.sweepDone)
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-j.sweepStop:
			return
		case <-t.C:
			for n, err := j.SweepJournal(j.now()); err == nil && n == sweepJournalMax; n, err = j.SweepJournal(j.now()) {
			}
		}
	}
}

// sweepEvery is how often the journal sweeps what is past its retention or
// budget.
const sweepEvery = 30 * time.Second
