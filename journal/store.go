package journal

import (
	"context"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/hookpace/hookpace/spool"
)

// store is what the journal asks of the queue it keeps the history of,
// besides the kept database it writes: reads of the queue, where a
// webhook is now, the state of the disk, the id sequence, the kept
// database's sync, the outcomes kept ahead in the queue, memory
// trimming, and Append to send a webhook again.
// *spool.Spool is the one. The methods named Locked are called with the
// journal's mutex held, which is the spool's (Open).
type store interface {
	// ReadQueue is a read of the queue as it is now; the caller discards it.
	ReadQueue() *badger.Txn
	// DecodeQueued reads the webhook of a queue item at host, l, id.
	DecodeQueued(host string, l spool.Lane, id uint64, item *badger.Item) (*spool.Message, error)
	Get(host string, l spool.Lane, id uint64) (*spool.Message, error)
	// FindQueued is the lane of webhook id in host's queue as txn sees it.
	FindQueued(txn *badger.Txn, host string, id uint64) (spool.Lane, bool)
	WhereNow(host string, id uint64) (state string, position int)
	// Headroom is the free space above spool.min_free (limited: there
	// is such a limit).
	Headroom() (room int64, limited bool)
	DiskFullLocked() bool
	SeqLocked() uint64
	SyncKept(vlog bool) error
	// Ahead reads the outcomes ahead in the queue; DropAhead removes
	// those the journal has made durable (spool.History).
	Ahead(fn func(id uint64, rec []byte) error) error
	DropAhead(ids []uint64)
	Trim(all bool)
	Append(ctx context.Context, m *spool.Message, hostLimit int64) error
}

var _ store = (*spool.Spool)(nil)
