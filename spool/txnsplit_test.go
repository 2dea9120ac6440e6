package spool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hookpace/hookpace/internal/record"
)

// smallTxns gives the queue a memtable small enough that a round of a
// few hundred keyed appends is over Badger's transaction limit (15% of
// the memtable), so that the writer commits it in parts.
func smallTxns(o badger.Options) badger.Options { return o.WithMemTableSize(256 << 10) }

// keyedMsgs are n appends of host, all of one size, each with its own
// idempotency key of about 250 bytes: a key record as large as the
// message's own, so that Badger's limit often falls between the two.
func keyedMsgs(host string, n, body int) ([]*Message, []Keys) {
	ms := make([]*Message, n)
	ks := make([]Keys, n)
	for i := range n {
		m := newMsg(host, i)
		m.Header.Set("X-Seq", fmt.Sprintf("%04d", i))
		m.Body = bytes.Repeat([]byte("x"), body)
		ms[i] = m
		ks[i] = Keys{Idempotency: fmt.Sprintf("%04d-", i) + strings.Repeat("k", 245), Window: time.Hour}
	}
	return ms, ks
}

// gatherKeyed is gather for AppendKeys.
func (h *heldWriter) gatherKeyed(t *testing.T, ms []*Message, ks []Keys) []error {
	t.Helper()
	return h.gatherEach(len(ms), func(i int) error {
		_, err := h.AppendKeys(context.Background(), ms[i], 0, ks[i])
		return err
	})
}

// queuedIDs are the ids of host's records in the queue database.
func queuedIDs(s *Spool, host string) map[uint64]bool {
	txn := s.ReadQueue()
	defer txn.Discard()
	prefix := queuePrefix(host)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	ids := map[uint64]bool{}
	for it.Rewind(); it.Valid(); it.Next() {
		if k := it.Item().Key(); len(k) == len(prefix)+8 {
			ids[record.BeUint64(k[len(prefix):])] = true
		}
	}
	return ids
}

// A round over Badger's transaction limit is committed in parts. A keyed
// append that the limit cuts between its message and its key record is
// staged again in the next part under the same id: the queue holds each
// acknowledged webhook once, under the id it was answered with, and no
// second copy of it under another.
func TestRoundCutInPartsQueuesEachAppendOnce(t *testing.T) {
	for body := 100; body < 110; body++ {
		h := openHeld(t, Options{tuneQueue: smallTxns})
		ms, ks := keyedMsgs("a.example", 200, body)
		for i, err := range h.gatherKeyed(t, ms, ks) {
			if err != nil {
				t.Fatalf("body %d: append %d: %v", body, i, err)
			}
		}
		ids := queuedIDs(h.Spool, "a.example")
		for _, m := range ms {
			if !ids[m.ID] {
				t.Fatalf("body %d: acknowledged id %d is not queued", body, m.ID)
			}
		}
		if len(ids) != len(ms) {
			t.Fatalf("body %d: %d records queued for %d acknowledged appends", body, len(ids), len(ms))
		}
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// The undo of a refused round deletes what the round wrote, however many
// parts that took: a round whose keys alone are over Badger's
// transaction limit is undone whole. Nothing of it stays queued, its
// keys are forgotten (a retry is stored), and its appends are answered
// with ErrReplication.
func TestRefusedRoundOverTheTransactionLimitIsUndoneWhole(t *testing.T) {
	rep := newMemReplica()
	rep.setRefuse(errors.New("stream down"))
	h := openHeld(t, Options{Replica: rep, tuneQueue: smallTxns})
	ms, ks := keyedMsgs("a.example", 200, 100)
	for i, err := range h.gatherKeyed(t, ms, ks) {
		if !errors.Is(err, ErrReplication) {
			t.Fatalf("append %d of the refused round: %v, want ErrReplication", i, err)
		}
	}
	requireNothingQueued(t, h.Spool, "after the refused round")
	rep.setRefuse(nil)
	retry := newMsg("a.example", 0)
	if got, err := h.AppendKeys(context.Background(), retry, 0, ks[0]); err != nil || got != Stored {
		t.Fatalf("retry of a refused key: %v, %v; want Stored", got, err)
	}
}
