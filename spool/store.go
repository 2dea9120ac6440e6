package spool

import (
	"math"

	badger "github.com/dgraph-io/badger/v4"
)

// A history (Options.History) reads the queue through the methods below
// besides Get and Append: the journal's store (journal/store.go).

// openHistory opens the history of Options.History, if any.
func (s *Spool) openHistory() error {
	if s.opts.History == nil {
		return nil
	}
	h, err := s.opts.History(s, s.kept, &s.mu)
	if err != nil {
		return err
	}
	if h != nil {
		s.hist = h
	}
	return nil
}

// ReadQueue is a read of the queue as it is now; the caller discards it.
func (s *Spool) ReadQueue() *badger.Txn { return s.queue.NewTransactionAt(math.MaxUint64, false) }

// DecodeQueued reads the message of a queue item at host, l, id (an item
// of ReadQueue's transaction).
func (s *Spool) DecodeQueued(host string, l Lane, id uint64, item *badger.Item) (*Message, error) {
	return s.decodeQueued(host, l, id, item)
}

// FindQueued is the lane of message id in host's queue as txn sees it.
func (s *Spool) FindQueued(txn *badger.Txn, host string, id uint64) (Lane, bool) {
	return s.findQueued(txn, host, id)
}

// Headroom is the free space above Options.MinFree (limited: there is
// such a limit).
func (s *Spool) Headroom() (room int64, limited bool) { return s.headroom() }

// DiskFullLocked says the spool refuses webhooks for space. The caller
// holds the spool's mutex: a History's Settled, or a history that
// shares it (Options.History).
func (s *Spool) DiskFullLocked() bool { return s.diskFull }

// SeqLocked is the last id handed out; the caller holds the spool's
// mutex, or the spool is not yet taking writes (Options.History).
func (s *Spool) SeqLocked() uint64 { return s.seq }

// SyncKept makes every commit to the kept database that has returned
// durable; vlog: one may have put a value in its value log (a value of
// ValueThreshold bytes or more).
func (s *Spool) SyncKept(vlog bool) error { return s.syncKept(vlog) }

// Trim gives back the pages of the spool's mapped files that a long read
// left resident: those above the spool's limit, or all of them.
func (s *Spool) Trim(all bool) {
	if all {
		trimResident(s.opts.Dir, 0)
		return
	}
	trimResident(s.opts.Dir, s.opts.trimLimit)
}

// The queue's and the dead letters' keys and records, for a history
// that reads them in place (ReadQueue, and the kept database).

// QueuePrefixes are the prefixes of the queue's keys for host, or of
// every host's ("").
func QueuePrefixes(host string) [][]byte {
	if host != "" {
		return [][]byte{hostPrefix(prefixQueue, host), hostPrefix(prefixLane, host)}
	}
	return [][]byte{{prefixQueue}, {prefixLane}}
}

// LaneKey is the queue's key of message id of lane l of host's.
func LaneKey(host string, l Lane, id uint64) []byte { return laneKey(host, l, id) }

// ParseQueueKey splits a queue key into its host, lane and id.
func ParseQueueKey(k []byte) (host string, l Lane, id uint64, ok bool) { return parseAnyKey(k) }

// DecodeMessage reads the record of message id of host (Message.Encode).
func DecodeMessage(host string, id uint64, b []byte) (*Message, error) {
	return decodeMessage(host, id, b)
}

// DecodeMessageHead is DecodeMessage without the body, of which it reads
// no byte.
func DecodeMessageHead(host string, id uint64, b []byte) (*Message, error) {
	return decodeMessageHead(host, id, b)
}

// Encode appends m's record to b (DecodeMessage reads it).
func (m *Message) Encode(b []byte) []byte { return m.encode(b) }

// DeadKey is the kept database's key of the dead letter of id.
func DeadKey(id uint64) []byte { return deadKey(id) }

// DecodeDead reads the dead letter of id from its record.
func DecodeDead(id uint64, v []byte) (*Dead, error) { return decodeDead(id, v) }

// HiddenHeader reports whether a header's value is hidden whole
// (Redacted) wherever it is shown: it is not on the allow-list.
func HiddenHeader(name string) bool { return showOf(name) == showNone }

// ErrText is what a log says of a store error: its first line, at most
// 200 bytes (stored bytes go to no log).
func ErrText(err error) string { return errText(err) }

// Clip cuts an error text to what a record keeps of one.
func Clip(s string) string { return clip(s) }

// TxnBudget is how many bytes one kept transaction takes before it is
// committed and another begun: well under Badger's limit.
const TxnBudget = txnBudget
