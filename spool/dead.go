package spool

import (
	"encoding/binary"
	"fmt"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hookpace/hookpace/internal/record"
)

// Dead is a message that failed for good, with why and when.
type Dead struct {
	Message *Message
	Reason  string
	DiedAt  time.Time
}

func (d *Dead) encode() []byte {
	b := make([]byte, 0, 1+strLen(d.Message.Host)+strLen(d.Reason)+varintLen(d.DiedAt.UnixNano())+d.Message.encodedLen())
	b = append(b, encodingVersion)
	b = record.AppendString(b, d.Message.Host)
	b = record.AppendString(b, d.Reason)
	b = binary.AppendVarint(b, d.DiedAt.UnixNano())
	return d.Message.encode(b)
}

func decodeDead(id uint64, v []byte) (*Dead, error) {
	dec := record.Decoder{B: v}
	if ver := dec.Byte(); ver != encodingVersion {
		return nil, fmt.Errorf("dead letter %s: unknown encoding version %d", IDString(id), ver)
	}
	host := dec.Str()
	reason := dec.Str()
	died := dec.Varint()
	if dec.Err != nil {
		return nil, fmt.Errorf("dead letter %s: %w", IDString(id), dec.Err)
	}
	m, err := decodeMessage(host, id, dec.B)
	if err != nil {
		return nil, err
	}
	return &Dead{Message: m, Reason: reason, DiedAt: time.Unix(0, died)}, nil
}

// DeadFilter selects dead letters. The zero value selects all of them.
type DeadFilter struct {
	IDs  []Ref  // only these (a Ref without its spool part: of this spool)
	Host string // only this host
	// Since and Until: only those that died at or after Since and before
	// Until (zero: no bound).
	Since, Until time.Time
}

func (f DeadFilter) match(d *Dead) bool {
	if f.Host != "" && d.Message.Host != f.Host {
		return false
	}
	if !f.Since.IsZero() && d.DiedAt.Before(f.Since) || !f.Until.IsZero() && !d.DiedAt.Before(f.Until) {
		return false
	}
	if len(f.IDs) == 0 {
		return true
	}
	ref := d.Message.Ref()
	for _, r := range f.IDs {
		if r.Matches(ref) {
			return true
		}
	}
	return false
}

// ListDead returns up to limit dead letters matching f, oldest first, and
// how many matched in all. Bodies are included.
func (s *Spool) ListDead(f DeadFilter, limit int) ([]*Dead, int, error) {
	var out []*Dead
	total := 0
	err := s.eachDead(f, func(d *Dead) bool {
		total++
		if limit <= 0 || len(out) < limit {
			out = append(out, d)
		}
		return true
	})
	return out, total, err
}

func (s *Spool) eachDead(f DeadFilter, fn func(*Dead) bool) error {
	return s.kept.View(func(txn *badger.Txn) error {
		return eachID(txn, prefixDead, true, func(id uint64, item *badger.Item) (bool, error) {
			var d *Dead
			if err := item.Value(func(v []byte) (err error) {
				d, err = decodeDead(id, v)
				if d != nil {
					d.Message.Spool = s.instance
				}
				return err
			}); err != nil {
				return false, err
			}
			return !f.match(d) || fn(d), nil
		})
	})
}

// ReplayDead moves the matching dead letters back into their hosts' queues,
// with their attempt counts reset, and returns how many moved. Each is
// queued under a new ID, at the tail of its host's queue, and paced like
// any other; its OriginID stays the id the app got with its 202. Its
// Enqueued is the replay's time, so that max_age counts from the replay
// (a webhook that died of max_age could not be replayed otherwise); the
// journal keeps the first acceptance's time in the first life's entry.
func (s *Spool) ReplayDead(f DeadFilter) (int, error) {
	var found []*Dead
	if err := s.eachDead(f, func(d *Dead) bool { found = append(found, d); return true }); err != nil {
		return 0, err
	}
	n := 0
	for _, d := range found {
		m := d.Message
		oldID := m.ID
		if m.Origin == 0 {
			m.Origin = oldID
		}
		m.Attempts, m.LastStatus, m.LastError, m.LastTry = 0, 0, "", time.Time{}
		m.Enqueued = s.opts.Now()
		val := m.record()
		o := &reviveOp{opBase: opBase{msg: m}, val: val, size: m.storedSize(val), dead: oldID}
		m.size = o.size
		if err := s.submitWait(o); err != nil {
			return n, fmt.Errorf("replay dead letter %s: %w", IDString(m.Origin), err)
		}
		n++
	}
	return n, nil
}

// PurgeDead deletes the matching dead letters for good and returns how many.
func (s *Spool) PurgeDead(f DeadFilter) (int, error) {
	var found []*Message
	if err := s.eachDead(f, func(d *Dead) bool { found = append(found, d.Message); return true }); err != nil {
		return 0, err
	}
	for _, m := range found {
		if err := s.submitWait(&purgeOp{dead: m.ID, host: m.Host}); err != nil {
			return 0, fmt.Errorf("purge dead letter %s: %w", IDString(m.OriginID()), err)
		}
	}
	return len(found), nil
}
