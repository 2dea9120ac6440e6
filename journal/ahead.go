package journal

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/hookpace/hookpace/spool"
)

// Outcomes ahead are the entries, with their outcomes, of the webhooks a
// round removes, kept in the queue by the commit that removes them
// (Leaving; spool/ahead.go) until the journal's own commit of them is
// durable. A round's entries go into as few records as fit under
// spool.ValueThreshold each, so that they stay inline in the queue's log
// and cost a write each, not one per webhook. A record is:
//
//	version (1), then for each entry: flags (aheadAccepted), the
//	webhook's id (uvarint), the entry's record (a uvarint length, then
//	the bytes)
//
// A record's id is the journal's, one more than the last it gave
// (aheadLast), counted from the highest found in the queue at a start. A
// start takes every outcome ahead in the queue again (takeAhead), as the
// journal's writer would have: those it wrote before are rewritten as
// they are (mergeEntry says so), the others written.
const (
	aheadVersion  = 1
	aheadAccepted = 1 << 0 // journalRec.accepted
	// aheadMax is the most bytes a record ahead takes, with its key, under
	// spool.ValueThreshold; an entry larger than that has a record of its
	// own.
	aheadMax = spool.ValueThreshold - 64
)

// aheadLocked makes the records ahead of recs, outcomes' records encoded
// (journalRec.val), and marks each rec with the id of the record holding
// it. mu is held.
func (j *Journal) aheadLocked(recs []journalRec) []spool.Ahead {
	var out []spool.Ahead
	var b []byte
	end := func() {
		if len(b) > 1 {
			out = append(out, spool.Ahead{ID: j.aheadLast, Rec: b})
		}
		b = nil
	}
	for i := range recs {
		r := &recs[i]
		n := 1 + binary.MaxVarintLen64 + binary.MaxVarintLen32 + len(r.val)
		if b != nil && len(b)+n > aheadMax {
			end()
		}
		if b == nil {
			j.aheadLast++
			b = append(make([]byte, 0, min(aheadMax, 1+n*(len(recs)-i))), aheadVersion)
		}
		var flags byte
		if r.accepted {
			flags |= aheadAccepted
		}
		b = append(b, flags)
		b = binary.AppendUvarint(b, r.e.ID)
		b = binary.AppendUvarint(b, uint64(len(r.val)))
		b = append(b, r.val...)
		r.ahead = j.aheadLast
	}
	end()
	return out
}

// readAhead is the outcomes' records that v, the record ahead id, holds:
// each merged with what the journal has, since the journal may have a
// note of it or an earlier life's outcome.
func readAhead(id uint64, v []byte) ([]journalRec, error) {
	if len(v) < 1 || v[0] != aheadVersion {
		return nil, errors.New("not a record of a known version")
	}
	var recs []journalRec
	for v = v[1:]; len(v) > 0; {
		flags := v[0]
		wid, n := binary.Uvarint(v[1:])
		if n <= 0 {
			return nil, errors.New("cut short")
		}
		v = v[1+n:]
		l, n := binary.Uvarint(v)
		if n <= 0 || uint64(len(v)-n) < l {
			return nil, errors.New("cut short")
		}
		val := v[n : n+int(l)]
		v = v[n+int(l):]
		e, err := decodeEntry(wid, val)
		if err != nil {
			return nil, err
		}
		if e.Outcome == "" {
			return nil, errors.New("an entry without an outcome")
		}
		recs = append(recs, journalRec{e: e, val: append([]byte(nil), val...), merge: true, ahead: id,
			accepted: flags&aheadAccepted != 0})
	}
	return recs, nil
}

// takeAhead hands the journal's writer every outcome ahead in the queue,
// with the links of the later lives among them (reliveRec), before the
// writer starts. A record that cannot be read is dropped, and logged: the
// history lacks those outcomes.
func (j *Journal) takeAhead() error {
	var recs []journalRec
	var bad []uint64
	err := j.st.Ahead(func(id uint64, v []byte) error {
		j.aheadLast = max(j.aheadLast, id)
		rs, err := readAhead(id, v)
		if err != nil {
			j.log.Warn("spool: outcomes kept in the queue for the journal cannot be read; the journal lacks them", "record", id, "error", err)
			bad = append(bad, id)
			return nil
		}
		recs = append(recs, rs...)
		for _, r := range rs {
			if origin := firstLife(r.e.ID, r.e.Origin, r.e.OriginSpool); origin != 0 {
				recs = append(recs, reliveRec(origin, r.e.ID))
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the outcomes kept in the queue: %w", err)
	}
	j.st.DropAhead(bad)
	j.pending = append(j.pending, recs...)
	j.seq += uint64(len(recs))
	return nil
}
