package spool

import (
	"context"
	"math"

	badger "github.com/dgraph-io/badger/v4"
)

// store is what the journal asks of the queue it keeps the history of,
// besides the kept database it writes: reads of the queue, where a
// webhook is now, the state of the disk, the id sequence, the kept
// database's sync, memory trimming, and Append to send a webhook again.
// *Spool is the one. The methods named Locked are called with the
// journal's mutex held, which is the spool's.
type store interface {
	// readQueue is a read of the queue as it is now; the caller discards it.
	readQueue() *badger.Txn
	// decodeQueued reads the webhook of a queue item at host, l, id.
	decodeQueued(host string, l Lane, id uint64, item *badger.Item) (*Message, error)
	Get(host string, l Lane, id uint64) (*Message, error)
	// findQueued is the lane of webhook id in host's queue as txn sees it.
	findQueued(txn *badger.Txn, host string, id uint64) (Lane, bool)
	whereNow(host string, id uint64) (state string, position int)
	// headroom is the free space above spool.min_free (limited: there
	// is such a limit).
	headroom() (room int64, limited bool)
	// diskFullLocked: the spool refuses webhooks for space.
	diskFullLocked() bool
	// seqLocked is the last id handed out.
	seqLocked() uint64
	// syncKept makes the kept database's returned commits durable; vlog:
	// one may have put a value in its value log.
	syncKept(vlog bool) error
	// trim gives back the pages a long read left resident: those above
	// the spool's limit, or all of them.
	trim(all bool)
	Append(ctx context.Context, m *Message, hostLimit int64) error
}

func (s *Spool) readQueue() *badger.Txn { return s.queue.NewTransactionAt(math.MaxUint64, false) }

func (s *Spool) diskFullLocked() bool { return s.diskFull }

func (s *Spool) seqLocked() uint64 { return s.seq }

func (s *Spool) trim(all bool) {
	if all {
		trimResident(s.opts.Dir, 0)
		return
	}
	trimResident(s.opts.Dir, s.opts.trimLimit)
}
