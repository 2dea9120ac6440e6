package spool

import (
	"reflect"
	"testing"
	"time"
)

// FuzzDecodeMessage feeds the stored-record decoders arbitrary bytes: they
// must never panic, and what decodeMessage accepts must survive a round
// trip through encode unchanged. The corpus in testdata/fuzz runs as an
// ordinary test; go test -fuzz FuzzDecodeMessage ./spool explores further.
func FuzzDecodeMessage(f *testing.F) {
	for i := range 4 {
		m := newMsg("a.example", i)
		m.Attempts, m.LastStatus, m.LastError = i, 503, "503 Service Unavailable"
		f.Add(m.encode(nil))
		if i%2 == 1 { // a version 4 record
			m.Fairness, m.Priority, m.Ordering = "tenant", Priority(i%3), "order"
			m.NotBefore = m.Enqueued.Add(time.Minute)
			f.Add(m.encode(nil))
		}
		d := &Dead{Message: m, Reason: "max_attempts 3 reached", DiedAt: m.Enqueued}
		f.Add(d.encode())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeDead(7, b)
		decodeEnqueued(b)
		m, err := decodeMessage("h.example", 7, b)
		if err != nil {
			return
		}
		enc := m.encode(nil)
		if len(enc) != m.encodedLen() {
			t.Fatalf("encodedLen %d, encode wrote %d", m.encodedLen(), len(enc))
		}
		again, err := decodeMessage("h.example", 7, enc)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if !reflect.DeepEqual(m, again) {
			t.Fatalf("round trip changed the message:\n%+v\n%+v", m, again)
		}
	})
}
