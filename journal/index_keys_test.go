package journal

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// entryIndex cuts its keys from one buffer: each must be the key that
// indexKey and indexPrefix make for its index, whatever the lengths.
func TestEntryIndexKeysMatchTheirIndexes(t *testing.T) {
	at := time.Unix(1_800_000_000, 123)
	for _, e := range []*Entry{
		{ID: 1, Host: "p1.example", Accepted: at},
		{ID: 2, Host: "p2.example:8443", Accepted: at, Idempotency: "k-1"},
		{ID: 3, Host: "h", Accepted: at, Idempotency: strings.Repeat("x", maxIndexedKey+50), Outcome: spool.OutcomeDead},
		{ID: 1 << 40, Host: "p4.example", Outcome: spool.OutcomeDelivered}, // no acceptance time
	} {
		p := pos{atOf(e.Accepted), e.ID}
		want := [][]byte{indexKey(indexPrefix(ixAll, ""), p), indexKey(indexPrefix(ixHost, e.Host), p),
			indexKey(indexPrefix(ixState, stateOf(e)), p)}
		if e.Idempotency != "" {
			want = append(want, indexKey(indexPrefix(ixIdem, e.Idempotency), p))
		}
		got := entryIndex(e)
		if len(got) != len(want) {
			t.Fatalf("entry %d: %d keys, want %d", e.ID, len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Errorf("entry %d key %d: %q, want %q", e.ID, i, got[i], want[i])
			}
		}
		// A key appended to must not write into the next one.
		_ = append(got[0], 0xff)
		if !bytes.Equal(got[1], want[1]) {
			t.Errorf("entry %d: appending to a key changed the next one", e.ID)
		}
	}
}
