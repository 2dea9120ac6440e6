package spool

import (
	"bytes"
	"math"
	"math/rand/v2"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

func randomMessage(r *rand.Rand) *Message {
	str := func(max int) string { return strings.Repeat("x", r.IntN(max+1)) }
	m := &Message{
		Method:     str(8),
		URL:        "http://a.example/" + str(300),
		Header:     http.Header{},
		Body:       bytes.Repeat([]byte{byte(r.Uint32())}, r.IntN(70000)),
		Enqueued:   time.Unix(0, r.Int64N(math.MaxInt64)-r.Int64N(math.MaxInt64)),
		Attempts:   r.IntN(1 << r.IntN(40)),
		LastStatus: r.IntN(600),
		LastError:  str(200),
	}
	if r.IntN(2) == 0 {
		m.LastTry = time.Unix(0, -r.Int64N(math.MaxInt64))
	}
	if r.IntN(3) == 0 { // replayed from the dead letters: a version 2 record
		m.Origin = 1 + r.Uint64N(1<<r.IntN(63))
	}
	if r.IntN(5) == 0 { // handed off: a version 3 record
		m.Origin, m.OriginSpool = 1+r.Uint64N(1<<r.IntN(63)), 1+r.Uint64()>>1
	}
	if r.IntN(3) == 0 { // lane fields: a version 4 record
		switch r.IntN(4) {
		case 0:
			m.Fairness = "tenant-" + str(40)
		case 1:
			m.Priority = Priority(1 + r.IntN(2))
		case 2:
			m.Ordering = "order-" + str(40)
		default:
			m.NotBefore = time.Unix(0, r.Int64N(math.MaxInt64))
		}
	}
	if r.IntN(4) == 0 { // a coalesce key: a version 5 record
		m.Coal = &Coalescing{Key: "key-" + str(40), Replaced: r.IntN(1000)}
		if m.Coal.Replaced > 0 {
			m.Coal.At = time.Unix(0, 1+r.Int64N(math.MaxInt64-1))
		}
	}
	for range r.IntN(6) {
		k := "X-" + str(20)
		for range r.IntN(3) {
			m.Header[k] = append(m.Header[k], str(150))
		}
	}
	return m
}

// The lengths computed for the exact-size buffers match what encode writes.
func TestEncodedLenIsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		m := randomMessage(r)
		if got, want := m.encodedLen(), len(m.encode(nil)); got != want {
			t.Fatalf("message %d: encodedLen %d, encode wrote %d bytes", i, got, want)
		}
		if got, want := m.headLen(), len(m.encodeHead(nil)); got != want {
			t.Fatalf("message %d: headLen %d, encodeHead wrote %d bytes", i, got, want)
		}
		d := &Dead{Message: m, Reason: "gone", DiedAt: time.Unix(0, r.Int64())}
		if b := d.encode(); len(b) != cap(b) {
			t.Fatalf("dead letter %d: %d bytes in a buffer of %d", i, len(b), cap(b))
		}
	}
}

// A body read with ReadBody is written in place, and the record is the same
// as encode's. A message changed after ReadBody is encoded afresh.
func TestReadBodyRecord(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 500 {
		m := randomMessage(r)
		want := m.encode(nil)
		body := m.Body
		m2 := *m
		m2.Body = nil
		if err := m2.ReadBody(bytes.NewReader(body), len(body)); err != nil {
			t.Fatal(err)
		}
		rec := m2.record()
		sameRecord(t, i, rec, want)
		if len(body) > 0 && &rec[len(rec)-len(body)] != &m2.Body[0] {
			t.Fatalf("message %d: body copied again", i)
		}
		if again := m2.record(); &again[0] == &rec[0] {
			t.Fatalf("message %d: a second record reused the first's buffer", i)
		}

		// Changed after ReadBody: a header grows, and the head no longer fits.
		m3 := *m
		m3.Header = m.Header.Clone()
		if err := m3.ReadBody(bytes.NewReader(body), len(body)); err != nil {
			t.Fatal(err)
		}
		m3.Header.Set("X-Added-Later", "value")
		got := m3.record()
		sameRecord(t, i, got, m3.encode(nil))
		if dm, _ := decodeMessage("a.example", 1, got); dm.Header.Get("X-Added-Later") != "value" {
			t.Fatalf("message %d: change after ReadBody lost", i)
		}
	}
}

// sameRecord compares two records by what they decode to: encode writes
// the headers in map order.
func sameRecord(t *testing.T, i int, got, want []byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("message %d: record of %d bytes, want %d", i, len(got), len(want))
	}
	g, err := decodeMessage("a.example", 1, got)
	if err != nil {
		t.Fatalf("message %d: %v", i, err)
	}
	w, err := decodeMessage("a.example", 1, want)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("message %d: record decodes to\n%+v\nwant\n%+v", i, g, w)
	}
}

func TestReadBodyShort(t *testing.T) {
	m := &Message{Method: "POST", URL: "http://a.example/"}
	if err := m.ReadBody(strings.NewReader("abc"), 5); err == nil {
		t.Fatal("a body shorter than its length was read without error")
	}
	if m.Body != nil {
		t.Fatalf("body set after a failed read: %q", m.Body)
	}
}

// A record decodes to the message it was made from; only a message with
// an Origin gets a version 2 record, so every other record is what
// earlier versions wrote and read.
func TestRecordRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 500 {
		m := randomMessage(r)
		m.ID, m.Host = 7, "a.example"
		rec := m.encode(nil)
		want := byte(encodingVersion + min(m.Origin, 1))
		switch {
		case m.Coal != nil:
			want = encodingVersionCoalesce
		case m.laned():
			want = encodingVersionLanes
		case m.OriginSpool != 0:
			want = encodingVersionHanded
		}
		if rec[0] != want {
			t.Fatalf("message %d (origin %d): version %d, want %d", i, m.Origin, rec[0], want)
		}
		got, err := decodeMessage("a.example", 7, rec)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if got.Fairness != m.Fairness || got.Priority != m.Priority || got.Ordering != m.Ordering ||
			!got.NotBefore.Equal(m.NotBefore) || got.OriginSpool != m.OriginSpool ||
			(got.Coal == nil) != (m.Coal == nil) || m.Coal != nil && (got.Coal.Key != m.Coal.Key || got.Coal.Replaced != m.Coal.Replaced || !got.Coal.At.Equal(m.Coal.At)) {
			t.Fatalf("message %d: lane fields %+v, want %+v", i, got, m)
		}
		if got.Origin != m.Origin || got.Method != m.Method || got.URL != m.URL || !got.Enqueued.Equal(m.Enqueued) ||
			got.Attempts != m.Attempts || got.LastError != m.LastError || !bytes.Equal(got.Body, m.Body) || len(got.Header) != len(m.Header) {
			t.Fatalf("message %d decodes to %+v", i, got)
		}
		if at, err := decodeEnqueued(rec); err != nil || !at.Equal(m.Enqueued) {
			t.Fatalf("message %d: enqueued %v, %v from the record's head", i, at, err)
		}
	}
	if _, err := decodeMessage("a.example", 7, []byte{6, 0}); err == nil || !strings.Contains(err.Error(), "version 6") {
		t.Fatalf("an unknown version: %v", err)
	}
	if _, err := decodeMessage("a.example", 7, nil); err == nil {
		t.Fatal("an empty record decoded")
	}
}
