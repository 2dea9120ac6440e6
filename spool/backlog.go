package spool

import (
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// Backlog control: an operator drops queued webhooks for good
// (purge) or moves them to the dead letters (bury). The dispatcher decides
// which, since it holds some of them in memory; these write the change.

// dropOp removes a queued message that was never delivered; the journal
// records it purged, by whom.
type dropOp struct {
	opBase
	old int64
	by  string
}

func (o *dropOp) kind() string  { return "drop" }
func (o *dropOp) shrinks() bool { return true }
func (o *dropOp) phases() phase { return phaseQueue }
func (o *dropOp) weight() int   { return len(o.msg.Host) + 10 + 64 }
func (o *dropOp) stage(_ phase, txn *badger.Txn, _ *uint64) error {
	return txn.Delete(o.msg.key())
}
func (o *dropOp) settle(l *ledger, _ time.Time) {
	l.add(o.msg.Host, -1, -o.old)
	l.laned(o.msg.Host, o.msg.Lane(), -1)
}

// Drop removes queued messages for good and returns once that is durable,
// with how many it removed. Each must be queued, and not in flight: the
// caller holds them.
func (s *Spool) Drop(ms []*Message, by string) (int, error) {
	ops := make([]op, len(ms))
	for i, m := range ms {
		ops[i] = &dropOp{opBase: opBase{msg: m, done: make(chan error, 1)}, old: m.size, by: by}
	}
	return s.submitAll(ops)
}

// DropLater is Drop without waiting: for a message whose attempt was in
// flight when it was purged, once the attempt has failed.
func (s *Spool) DropLater(m *Message, by string) {
	s.submit(&dropOp{opBase: opBase{msg: m}, old: m.size, by: by})
}

// BuryAll is Bury for many messages, returning once they are durable.
func (s *Spool) BuryAll(ms []*Message, reason string, at time.Time) (int, error) {
	ops := make([]op, len(ms))
	for i, m := range ms {
		m.LastError = clip(m.LastError)
		d := &Dead{Message: m, Reason: clip(reason), DiedAt: at}
		ops[i] = &buryOp{opBase: opBase{msg: m, done: make(chan error, 1)}, val: d.encode(), old: m.size, reason: d.Reason}
	}
	return s.submitAll(ops)
}

// submitAll submits ops that each wait, and waits for them all: one
// round usually takes them together.
func (s *Spool) submitAll(ops []op) (int, error) {
	var first error
	var dones []chan error
	for _, o := range ops {
		done := o.base().done
		if err := s.submit(o); err != nil {
			first = err
			break
		}
		dones = append(dones, done)
	}
	n := 0
	for _, done := range dones {
		if err := <-done; err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		n++
	}
	return n, first
}

// Queued lists host's queue, every lane, up to max messages (bodies
// included): lane Lane{} first, then the other lanes in key order, each
// oldest first (see ReadHost).
func (s *Spool) Queued(host string, max int) ([]*Message, error) {
	ms, _, err := s.ReadHost(host, HostCursor{}, max)
	return ms, err
}

// HandedOff is Delete for a webhook that another hookpace has accepted at
// this one's shutdown: the journal records it handed off, to where.
func (s *Spool) HandedOff(m *Message, to string) error {
	return s.submitWait(&deleteOp{opBase: opBase{msg: m}, old: m.size, to: to})
}
