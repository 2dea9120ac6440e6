package spool

import (
	"encoding/hex"
	"net/http"
	"testing"
	"time"
)

// A message without lane fields is stored byte for byte as before lanes:
// these records are what the commit before them (2035acb) wrote, for
// versions 1, 2 and 3. They still decode, and encode to the same bytes.
func TestRecordsWithoutLanesUnchanged(t *testing.T) {
	for i, c := range []struct {
		m   *Message
		hex string
	}{
		{&Message{Method: "POST", URL: "http://a.example/hook", Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"n":1}`),
			Enqueued: time.Unix(1700000000, 5), Attempts: 2, LastStatus: 503, LastError: "503", LastTry: time.Unix(1700000001, 0)},
			"0104504f535415687474703a2f2f612e6578616d706c652f686f6f6b8a80d0e2c6bfce972f02f7030335303380a8a69ccebfce972f010c436f6e74656e742d5479706501106170706c69636174696f6e2f6a736f6e077b226e223a317d"},
		{&Message{Origin: 77, Method: "POST", URL: "http://a.example/hook", Body: []byte(`x`), Enqueued: time.Unix(1700000000, 5)},
			"024d04504f535415687474703a2f2f612e6578616d706c652f686f6f6b8a80d0e2c6bfce972f00000000000178"},
		{&Message{Origin: 77, OriginSpool: 0xabcdef, Method: "PUT", URL: "http://a.example/h", Body: []byte(`y`), Enqueued: time.Unix(1700000000, 5)},
			"034d0000000000abcdef0350555412687474703a2f2f612e6578616d706c652f688a80d0e2c6bfce972f00000000000179"},
	} {
		if got := hex.EncodeToString(c.m.encode(nil)); got != c.hex {
			t.Fatalf("record %d:\n got %s\nwant %s", i, got, c.hex)
		}
		old, _ := hex.DecodeString(c.hex)
		m, err := decodeMessage("a.example", 7, old)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if m.laned() || m.Lane() != (Lane{}) || m.Coal != nil || m.Origin != c.m.Origin || m.OriginSpool != c.m.OriginSpool || string(m.Body) != string(c.m.Body) {
			t.Fatalf("record %d decodes to %+v", i, m)
		}
	}
}

// A version 4 record keeps the lane fields, with the origin of a handed
// off webhook; a priority it does not know is a corrupt record.
func TestRecordLaneFields(t *testing.T) {
	m := &Message{Origin: 9, OriginSpool: 3, Method: "POST", URL: "http://a.example/", Body: []byte("b"), Enqueued: time.Unix(1700000000, 0),
		Fairness: "tenant-a", Priority: PriorityLow, Ordering: "order-1", NotBefore: time.Unix(1700000030, 0)}
	rec := m.encode(nil)
	if rec[0] != encodingVersionLanes || len(rec) != m.encodedLen() || m.headLen() != len(m.encodeHead(nil)) {
		t.Fatalf("version %d, length %d (encodedLen %d)", rec[0], len(rec), m.encodedLen())
	}
	got, err := decodeMessage("a.example", 7, rec)
	if err != nil {
		t.Fatal(err)
	}
	if got.Fairness != "tenant-a" || got.Priority != PriorityLow || got.Ordering != "order-1" || !got.NotBefore.Equal(m.NotBefore) ||
		got.Origin != 9 || got.OriginSpool != 3 {
		t.Fatalf("decoded %+v", got)
	}
	// The priority byte follows the version, origin (1), spool (8) and
	// fairness key (1 + 8).
	bad := append([]byte(nil), rec...)
	bad[1+1+8+1+8] = 7
	if _, err := decodeMessage("a.example", 7, bad); err == nil {
		t.Fatal("a record with priority 7 decoded")
	}
	// Each field alone takes version 4.
	for _, m := range []*Message{{Fairness: "k"}, {Priority: PriorityHigh}, {Ordering: "o"}, {NotBefore: time.Unix(1, 0)}} {
		if rec := m.encode(nil); rec[0] != encodingVersionLanes {
			t.Fatalf("%+v: version %d", m, rec[0])
		}
	}
}

// A webhook with a coalesce key takes a version 5 record: version 4's
// fields, then the key and its replacements. A version 4 record, as
// written before records kept the key (hex from the encoder at 30ed781),
// decodes without one.
func TestRecordCoalesceKey(t *testing.T) {
	v4, _ := hex.DecodeString("040900000000000000030874656e616e742d6102076f726465722d3180b0eda4a6c1ce972f04504f535411687474703a2f2f612e6578616d706c652f8080d0e2c6bfce972f00000000000162")
	m, err := decodeMessage("a.example", 7, v4)
	if err != nil || m.Fairness != "tenant-a" || m.Ordering != "order-1" || m.Coal != nil || string(m.Body) != "b" {
		t.Fatalf("version 4 record: %+v, %v", m, err)
	}
	for _, m := range []*Message{
		{Method: "POST", URL: "http://a.example/", Body: []byte("b"), Enqueued: time.Unix(1700000000, 0), Coal: &Coalescing{Key: "order-9"}},
		{Origin: 9, Method: "POST", URL: "http://a.example/", Body: []byte("b"), Enqueued: time.Unix(1700000000, 0),
			Fairness: "tenant-a", Priority: PriorityLow, Coal: &Coalescing{Key: "order-9", Replaced: 3, At: time.Unix(1700000002, 0)}},
	} {
		rec := m.encode(nil)
		if rec[0] != encodingVersionCoalesce || len(rec) != m.encodedLen() {
			t.Fatalf("version %d, length %d (encodedLen %d)", rec[0], len(rec), m.encodedLen())
		}
		got, err := decodeMessage("a.example", 7, rec)
		if err != nil || got.Coal == nil || got.Coal.Key != m.Coal.Key || got.Coal.Replaced != m.Coal.Replaced || !got.Coal.At.Equal(m.Coal.At) ||
			got.Lane() != m.Lane() || got.Origin != m.Origin || string(got.Body) != "b" {
			t.Fatalf("decoded %+v, %v", got, err)
		}
	}
}

// Lane keys parse back to their host, lane and id; Lane{} is under its
// queue key, unchanged; what is not a lane key does not parse.
func TestLaneKeys(t *testing.T) {
	for _, l := range []Lane{{Key: "A"}, {Priority: PriorityHigh}, {Key: "tenant/1", Priority: PriorityLow}, {Key: "x", Priority: PriorityHigh}} {
		k := laneKey("a.example:8443", l, 42)
		if len(k) != laneKeyLen("a.example:8443", l) {
			t.Fatalf("%+v: key of %d bytes, laneKeyLen %d", l, len(k), laneKeyLen("a.example:8443", l))
		}
		h, got, id, ok := parseAnyKey(k)
		if !ok || h != "a.example:8443" || got != l || id != 42 {
			t.Fatalf("%+v: parsed %q %+v %d %v", l, h, got, id, ok)
		}
	}
	if k := laneKey("a.example", Lane{}, 42); string(k) != string(queueKey("a.example", 42)) {
		t.Fatalf("Lane{} key %q", k)
	}
	for _, k := range [][]byte{
		queueKey("a.example", 1),
		[]byte("la.example\x00A\x00\x07\x00\x00\x00\x00\x00\x00\x00\x01"), // rank 7
		[]byte("la.example\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01"),  // Lane{} under a lane key
		[]byte("la.example\x00A\x01\x00\x00\x00\x00\x00\x00\x00\x00\x01"), // no end to the key
		[]byte("l\x00\x01"),
	} {
		if _, _, _, ok := parseLaneKey(k); ok {
			t.Fatalf("%q parsed as a lane key", k)
		}
	}
}
