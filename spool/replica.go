package spool

import (
	"encoding/binary"
	"errors"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
)

// Replica keeps a copy of the queue off this node (package replicate). The
// writer calls it inside each group commit, so that an append is
// acknowledged only once both the local write and the copy are durable,
// and a message that leaves the queue leaves the copy in the same round.
type Replica interface {
	// Publish copies the records a round adds to the queue, and returns
	// once every copy is stored. An error fails the round's appends: they
	// get a *WriteError (ErrReplication) and are not kept. It may run on
	// a goroutine of its own while the round commits locally; one round
	// publishes at a time, and before the removals of later rounds.
	Publish(recs []Replicated) error
	// Remove deletes the copies of messages that left the queue (keys
	// are Replicated.Key); it does not wait. A removal that fails leaves
	// a copy that may be delivered again: at-least-once.
	Remove(keys []string)
}

// Replicated is one record copied off this node.
type Replicated struct {
	Key    string // the record's identity: this spool's instance and its id (Ref.String)
	Ref    string // the webhook's X-Hookpace-Id (Message.Ref), kept by whoever adopts it
	Host   string
	Record []byte // as the queue stores it (DecodeRecord reads it back)
	// Replaces says that the record replaces an earlier copy of Key (a
	// coalesced webhook): the copy is stored again, not de-duplicated.
	Replaces bool
}

// ErrReplication: the replica could not store the copy of a webhook (see
// spool.replicate); it was not kept, and the client may retry.
var ErrReplication = errors.New("the replicated spool cannot take the write (spool.replicate)")

// DecodeRecord reads back a record that Replicated carried: the message of
// host as the spool that published it stored it, with no id on this one.
func DecodeRecord(host string, rec []byte) (*Message, error) {
	return decodeMessage(host, 0, rec)
}

// Key is the identity of m's record on this spool, as Replicated.Key.
func (s *Spool) Key(m *Message) string { return Ref{Spool: s.instance, Seq: m.ID}.String() }

// Replicated is the copy of m, a queued message read from this spool, to
// publish again (one acknowledged on the local spool alone).
func (s *Spool) Replicated(m *Message) Replicated {
	return Replicated{Key: s.Key(m), Ref: m.Ref().String(), Host: m.Host, Record: m.record()}
}

// replicas are the copies of the appends among ops (staged, not yet
// committed) for the replica.
func (s *Spool) replicas(ops []op) []Replicated {
	var recs []Replicated
	for _, o := range ops {
		a, ok := o.(*appendOp)
		var val []byte
		replaces := false
		switch {
		case o.base().err != nil || !o.adds():
			continue
		case ok && a.coal != nil && a.coal.target != 0:
			val, replaces = a.coal.newVal, true
		case ok:
			val = a.val
		default:
			r, isRevive := o.(*reviveOp)
			if !isRevive {
				continue
			}
			val = r.val
		}
		m := o.base().msg
		recs = append(recs, Replicated{Key: s.Key(m), Ref: m.Ref().String(), Host: m.Host, Record: val, Replaces: replaces})
	}
	return recs
}

// published takes the replica's verdict on the appends among ops: when it
// refused them (err), they fail with ErrReplication, and are returned.
func (s *Spool) published(ops []op, err error) []op {
	if err == nil {
		return nil
	}
	var refused []op
	for _, o := range ops {
		if o.base().err == nil && o.adds() {
			o.base().err = &WriteError{Err: ErrReplication}
			refused = append(refused, o)
		}
	}
	s.log.Error("spool: replication refused a round; its webhooks are not kept", "error", err, "webhooks", len(refused))
	return refused
}

// publishing is a round's publish, running while the round commits.
type publishing struct {
	done chan error // nil: nothing published alongside the commit
}

func (p *publishing) start(r Replica, recs []Replicated) {
	p.done = make(chan error, 1)
	go func() { p.done <- r.Publish(recs) }()
}

// undoable reports whether every append among ops (staged) can be undone
// exactly after its round is committed, by deleting the keys it added
// (added). A replacement of a queued webhook's content (coalesce) cannot,
// nor a renewed idempotency record (it overwrote an expired one): a round
// with one publishes before it commits.
func undoable(ops []op) bool {
	for _, o := range ops {
		a, ok := o.(*appendOp)
		if ok && o.base().err == nil && (a.coal != nil && a.coal.target != 0 || a.once != nil && a.once.renew) {
			return false
		}
	}
	return true
}

// added is the keys an append (or a replayed dead letter) added to the
// queue: none was there before the round.
func added(o op) [][]byte {
	switch o := o.(type) {
	case *appendOp:
		keys := [][]byte{o.msg.key()}
		if o.once != nil && o.once.record {
			keys = append(keys, o.once.key)
		}
		return keys
	case *reviveOp:
		return [][]byte{o.msg.key()}
	}
	return nil
}

// unreplicate removes the copies of the messages a committed round took
// out of the queue.
func (s *Spool) unreplicate(ops []op) {
	if s.opts.Replica == nil {
		return
	}
	var keys []string
	for _, o := range ops {
		switch o.(type) {
		case *deleteOp, *buryOp, *dropOp:
			if o.base().err == nil {
				keys = append(keys, s.Key(o.base().msg))
			}
		}
	}
	if len(keys) > 0 {
		s.opts.Replica.Remove(keys)
	}
}

// keyReplica holds, in the kept database, the name of the replica the spool
// belongs to and the lease epoch it last held (8 bytes, then the name).
var keyReplica = []byte("repl")

// loadReplica checks the spool's replica name against Options.ReplicaName,
// recording it in a spool that has none.
func (s *Spool) loadReplica() error {
	name := s.opts.ReplicaName
	if name == "" {
		return nil
	}
	err := s.kept.View(func(txn *badger.Txn) error {
		item, err := txn.Get(keyReplica)
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if len(v) < 8 {
				return errors.New("spool's replica record is corrupt")
			}
			if got := string(v[8:]); got != name {
				return fmt.Errorf("the spool belongs to replica %q, not %q (fleet.replica): give each replica its own spool", got, name)
			}
			s.replicaEpoch = binary.BigEndian.Uint64(v)
			return nil
		})
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return s.SetReplicaEpoch(0)
	}
	return err
}

// ReplicaEpoch is the lease epoch the spool's replica last recorded (0:
// none yet).
func (s *Spool) ReplicaEpoch() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replicaEpoch
}

// SetReplicaEpoch records durably that the spool's replica holds its lease
// at epoch.
func (s *Spool) SetReplicaEpoch(epoch uint64) error {
	v := binary.BigEndian.AppendUint64(nil, epoch)
	v = append(v, s.opts.ReplicaName...)
	if err := s.kept.Update(func(txn *badger.Txn) error { return txn.Set(keyReplica, v) }); err != nil {
		return fmt.Errorf("record the replica's epoch: %w", err)
	}
	if err := s.syncKept(false); err != nil {
		return fmt.Errorf("record the replica's epoch: %w", err)
	}
	s.mu.Lock()
	s.replicaEpoch = epoch
	s.mu.Unlock()
	return nil
}
