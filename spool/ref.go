package spool

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	badger "github.com/dgraph-io/badger/v4"
)

// Ref is a webhook's identity for users and receivers: the X-Hookpace-Id
// of the app's 202, the id header and webhook-id of every delivery, the
// id of its dead letter. It is unique across a fleet: the spool that
// first accepted the webhook (a random number drawn when that spool was
// created) and the id it got there. Every sidecar's spool numbers its
// webhooks from 1; without the spool part, two replicas would give two
// webhooks one id, and a receiver that de-duplicates on it would drop the
// second.
type Ref struct {
	Spool uint64 // 0 in a ParseRef of a short id: the spool it is given to
	Seq   uint64
}

// String is the id as users see it: 32 hex digits, the spool's then the
// sequence's; 16, the sequence's, when the spool is left out (see
// ParseRef).
func (r Ref) String() string {
	if r.Spool == 0 {
		return IDString(r.Seq)
	}
	var b [32]byte
	putHex(b[:16], r.Spool)
	putHex(b[16:], r.Seq)
	return string(b[:])
}

func putHex(b []byte, v uint64) {
	const hex = "0123456789abcdef"
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = hex[v&0xf]
		v >>= 4
	}
}

// ParseRef is the inverse of String. It also takes a short id (up to 16
// hex digits, the sequence alone, as hookpace wrote ids before they had a
// spool part): a webhook of the spool it is given to.
func ParseRef(s string) (Ref, error) {
	if len(s) == 32 {
		sp, err1 := strconv.ParseUint(s[:16], 16, 64)
		seq, err2 := strconv.ParseUint(s[16:], 16, 64)
		if err1 == nil && err2 == nil && seq != 0 {
			return Ref{Spool: sp, Seq: seq}, nil
		}
	} else if len(s) <= 16 {
		if seq, err := strconv.ParseUint(s, 16, 64); err == nil && seq != 0 {
			return Ref{Seq: seq}, nil
		}
	}
	return Ref{}, fmt.Errorf("bad message id %q (want the 32 hex digits of an X-Hookpace-Id)", s)
}

// Matches reports whether r names the webhook whose identity is o: the
// same sequence, and the same spool unless r leaves it out.
func (r Ref) Matches(o Ref) bool {
	return r.Seq == o.Seq && (r.Spool == 0 || r.Spool == o.Spool)
}

// Ref is m's identity (see Ref): where the app got its 202. That is the
// spool that holds m, under ID, unless m was queued again since: a
// dead-letter replay keeps its Origin on the same spool; a webhook handed
// off by another hookpace at shutdown keeps that spool's (OriginSpool).
func (m *Message) Ref() Ref {
	if m.OriginSpool != 0 {
		return Ref{Spool: m.OriginSpool, Seq: m.Origin}
	}
	return Ref{Spool: m.Spool, Seq: m.OriginID()}
}

// keyInstance holds the spool's identity, drawn when it is created.
var keyInstance = []byte("inst")

// Instance is the spool's identity, the spool part of its webhooks' Refs.
func (s *Spool) Instance() uint64 { return s.instance }

// loadInstance reads the spool's identity, or draws and stores one for a
// new spool (or one written before spools had one).
func (s *Spool) loadInstance() error {
	err := s.kept.View(func(txn *badger.Txn) error {
		item, err := txn.Get(keyInstance)
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if len(v) != 8 || binary.BigEndian.Uint64(v) == 0 {
				return errors.New("spool identity is corrupt")
			}
			s.instance = binary.BigEndian.Uint64(v)
			return nil
		})
	})
	if !errors.Is(err, badger.ErrKeyNotFound) {
		return err
	}
	var b [8]byte
	for binary.BigEndian.Uint64(b[:]) == 0 {
		rand.Read(b[:])
	}
	if err := s.kept.Update(func(txn *badger.Txn) error { return txn.Set(keyInstance, b[:]) }); err != nil {
		return fmt.Errorf("store the spool identity: %w", err)
	}
	if err := s.syncKept(false); err != nil {
		return fmt.Errorf("store the spool identity: %w", err)
	}
	s.instance = binary.BigEndian.Uint64(b[:])
	return nil
}
