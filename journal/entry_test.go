package journal

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hookpace/hookpace/spool"
)

// Version-1 entries, as the encoder before version 2 wrote them (hex
// captured from it at 9b6a281): one delivered with its final attempt,
// one queued, one dead. They decode as they did.
func TestJournalDecodesVersion1(t *testing.T) {
	for _, c := range []struct {
		name, hex string
		id        uint64
		want      Entry
	}{
		{"delivered", "0103a2220e612e6578616d706c653a3834343304504f53542a68747470733a2f2f612e6578616d706c653a383434332f686f6f6b3f746f6b656e3d5245444143544544086f726465722d3432d2098a80d0e2c6bfce972f0964656c69766572656480a8a69ccebfce972f0080a8a69ccebfce972f01809bee02c8010001010c436f6e74656e742d547970650a746578742f706c61696e026f6b",
			7, Entry{ID: 7, Origin: 3, OriginSpool: 0x1122, Host: "a.example:8443", Method: "POST", URL: "https://a.example:8443/hook?token=REDACTED",
				Idempotency: "order-42", Size: 1234, Accepted: time.Unix(1700000000, 5), Outcome: spool.OutcomeDelivered, OutcomeAt: time.Unix(1700000001, 0),
				Final: &spool.Attempt{At: time.Unix(1700000001, 0), Duration: 3 * time.Millisecond, Status: 200, Header: http.Header{"Content-Type": {"text/plain"}}, Body: []byte("ok"), Batch: 1}}},
		{"queued", "01000009622e6578616d706c650350555412687474703a2f2f622e6578616d706c652f78000580d0fcd5d5bfce972f000000",
			8, Entry{ID: 8, Host: "b.example", Method: "PUT", URL: "http://b.example/x", Size: 5, Accepted: time.Unix(1700000002, 0)}},
		{"dead", "01000009622e6578616d706c6504504f535412687474703a2f2f622e6578616d706c652f79000080f8d28fddbfce972f046465616480a0a9c9e4bfce972f166d61785f617474656d7074733a206874747020353030",
			9, Entry{ID: 9, Host: "b.example", Method: "POST", URL: "http://b.example/y", Accepted: time.Unix(1700000003, 0), Outcome: spool.OutcomeDead,
				OutcomeAt: time.Unix(1700000004, 0), Reason: "max_attempts: http 500"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := hex.DecodeString(c.hex)
			if err != nil {
				t.Fatal(err)
			}
			e, err := decodeEntry(c.id, v)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*e, c.want) {
				t.Fatalf("got  %+v\nwant %+v", *e, c.want)
			}
			h, err := decodeEntryHead(c.id, v)
			if err != nil || h.Final != nil || h.Host != c.want.Host || h.Outcome != c.want.Outcome {
				t.Fatalf("head %+v %v", h, err)
			}
		})
	}
}

// A version-2 entry keeps its coalesce key and replacements, its lane and
// its request headers, secret values redacted and long ones cut; a
// listing's decode leaves the headers and the final attempt out.
func TestJournalEntryVersion2(t *testing.T) {
	long := make([]byte, 3000)
	for i := range long {
		long[i] = 'x'
	}
	e := Entry{ID: 3, Host: "a.example", Method: "POST", URL: "http://a.example/", Size: 2, Accepted: time.Unix(1700000000, 0),
		Coalesce: "order-7", Replaced: 2, ReplacedAt: time.Unix(1700000005, 0),
		Fairness: "tenant-1", Priority: spool.PriorityHigh, Ordering: "acct-9", NotBefore: time.Unix(1700000100, 0),
		Header: http.Header{"Authorization": {"Bearer s3cret"}, "Cookie": {"sid=1"}, "X-Api-Key": {"k"},
			"Content-Type": {"application/json"}, "Accept": {"a", "b"}, "User-Agent": {string(long)}, "X-Webhook-Hmac": {"h"}},
		Outcome: spool.OutcomeDelivered, OutcomeAt: time.Unix(1700000200, 0), Final: &spool.Attempt{At: time.Unix(1700000200, 0), Status: 204, Batch: 1}}
	got, err := decodeEntry(3, e.encode())
	if err != nil {
		t.Fatal(err)
	}
	want := e
	want.Header = http.Header{"Authorization": {spool.Redacted}, "Cookie": {spool.Redacted}, "X-Api-Key": {spool.Redacted},
		"Content-Type": {"application/json"}, "Accept": {"a, b"}, "User-Agent": {string(long[:maxEntryHeaderValue])}, "X-Webhook-Hmac": {spool.Redacted}}
	want.Final = &spool.Attempt{At: time.Unix(1700000200, 0), Status: 204, Batch: 1, Body: []byte{}}
	if !reflect.DeepEqual(*got, want) {
		t.Fatalf("got  %+v\nwant %+v", *got, want)
	}
	head, err := decodeEntryHead(3, e.encode())
	if err != nil || head.Header != nil || head.Final != nil || head.Coalesce != "order-7" || head.Fairness != "tenant-1" {
		t.Fatalf("head %+v %v", head, err)
	}
	// Every cut of the record is an error, never a panic or a wrong entry.
	whole := e.encode()
	for n := range len(whole) {
		if got, err := decodeEntry(3, whole[:n]); err == nil && got.Final != nil {
			t.Fatalf("cut at %d of %d: %+v", n, len(whole), got)
		}
	}
	// Many headers: at most maxEntryHeaders kept, the length beyond two bytes.
	many := http.Header{}
	for i := range 100 {
		many.Set("X-H"+spool.IDString(uint64(i)), string(long[:500]))
	}
	e.Header = many
	got, err = decodeEntry(3, e.encode())
	if err != nil || len(got.Header) != maxEntryHeaders || got.Final == nil {
		t.Fatalf("%d headers, %v", len(got.Header), err)
	}
}

// Through the spool: the entry of a webhook with a coalesce key, a lane
// and a secret header, replaced twice, then delivered, and after a
// restart; one accepted before a restart and delivered after keeps its
// key (read from its record).
func TestJournalEntryCoalesceLaneHeaders(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, testOpts{})
	ctx := context.Background()
	first := newMsg("a.example", 1)
	first.Header.Set("Authorization", "Bearer s3cret")
	first.Fairness, first.Priority = "tenant-1", spool.PriorityLow
	first.NotBefore = time.Unix(1700000100, 0)
	keys := spool.Keys{Coalesce: "order-7"}
	if how, err := s.AppendKeys(ctx, first, 0, keys); err != nil || how != spool.Stored {
		t.Fatal(how, err)
	}
	for i := 2; i <= 3; i++ {
		u := newMsg("a.example", i)
		u.Fairness = "ignored" // a replacement keeps its target's lane
		u.Header.Set("Authorization", "Bearer s3cret")
		if how, err := s.AppendKeys(ctx, u, 0, keys); err != nil || how != spool.Coalesced || u.ID != first.ID {
			t.Fatal(how, err, u.ID)
		}
	}
	check := func(s *spool.Spool, state string) {
		t.Helper()
		v, err := journalOf(s).Lookup(spool.Ref{Seq: first.ID})
		if err != nil {
			t.Fatal(err)
		}
		e := v.Entry
		if v.State != state || e.Coalesce != "order-7" || e.Replaced != 2 || !e.ReplacedAt.Equal(time.Unix(1700000000, 3)) ||
			!e.Accepted.Equal(first.Enqueued) || e.Fairness != "tenant-1" || e.Priority != spool.PriorityLow || !e.NotBefore.Equal(first.NotBefore) {
			t.Fatalf("state %s, entry %+v", v.State, e)
		}
		if e.Header.Get("Authorization") != spool.Redacted || e.Header.Get("X-Seq") != spool.Redacted || e.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("headers %v", e.Header)
		}
	}
	settleJournal(t, s)
	check(s, spool.StateQueued)
	got, err := s.ReadLane("a.example", first.Lane(), 0, 10)
	if err != nil || len(got) != 1 {
		t.Fatal(len(got), err)
	}
	s.Begin(got[0])
	if err := s.Delete(got[0]); err != nil {
		t.Fatal(err)
	}
	s.End(got[0])
	check(s, spool.OutcomeDelivered)
	later := newMsg("b.example", 9)
	if _, err := s.AppendKeys(ctx, later, 0, spool.Keys{Coalesce: "k-9"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, testOpts{})
	defer s.Close()
	check(s, spool.OutcomeDelivered)
	got, err = s.Read("b.example", 0, 10)
	if err != nil || len(got) != 1 {
		t.Fatal(len(got), err)
	}
	if err := s.Delete(got[0]); err != nil {
		t.Fatal(err)
	}
	v, err := journalOf(s).Lookup(spool.Ref{Seq: later.ID})
	if err != nil || v.State != spool.OutcomeDelivered || v.Entry.Coalesce != "k-9" || v.Entry.Header.Get("X-Seq") != spool.Redacted || !v.Entry.Accepted.Equal(later.Enqueued) {
		t.Fatalf("%+v %v", v, err)
	}
}

// A webhook with a coalesce key costs the journal nothing at ingest,
// nor does a replacement of its content: the queue's record keeps the
// key and the replacements, for listings while it is queued, after a
// restart too, and for its entry when it leaves the queue.
func TestJournalCoalesceKeyAtExit(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, testOpts{journalLinger: time.Hour})
	ctx := context.Background()
	handed := func(s *spool.Spool) uint64 {
		j := journalOf(s)
		j.mu.Lock()
		defer j.mu.Unlock()
		return j.seq
	}
	before := handed(s)
	first := newMsg("a.example", 1)
	keys := spool.Keys{Coalesce: "c"}
	if _, err := s.AppendKeys(ctx, first, 0, keys); err != nil {
		t.Fatal(err)
	}
	for i := 2; i <= 3; i++ {
		if a, err := s.AppendKeys(ctx, newMsg("a.example", i), 0, keys); a != spool.Coalesced || err != nil {
			t.Fatalf("append %d: %v, %v", i, a, err)
		}
	}
	if n := handed(s) - before; n != 0 {
		t.Fatalf("the appends handed the journal %d records at ingest; want none", n)
	}
	check := func(s *spool.Spool, state string) {
		t.Helper()
		v, err := journalOf(s).Lookup(spool.Ref{Seq: first.ID})
		if err != nil || v.State != state || v.Entry.Coalesce != "c" || v.Entry.Replaced != 2 ||
			!v.Entry.Accepted.Equal(first.Enqueued) || !v.Entry.ReplacedAt.Equal(time.Unix(1700000000, 3)) {
			t.Fatalf("lookup: %+v, %v; want %s with key c, replaced twice", v, err, state)
		}
		page, _, err := journalOf(s).List(Query{Host: "a.example"})
		if err != nil || len(page) != 1 || page[0].Coalesce != "c" || page[0].Replaced != 2 {
			t.Fatalf("list: %+v, %v", page, err)
		}
	}
	check(s, spool.StateQueued)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, testOpts{})
	defer s.Close()
	check(s, spool.StateQueued)
	got, err := s.Read("a.example", 0, 10)
	if err != nil || len(got) != 1 {
		t.Fatal(len(got), err)
	}
	if err := s.Delete(got[0]); err != nil {
		t.Fatal(err)
	}
	check(s, spool.OutcomeDelivered)
	err = journalOf(s).kept.View(func(txn *badger.Txn) error {
		e, err := journalEntry(txn, first.ID)
		if err == nil && (e.Coalesce != "c" || e.Replaced != 2 || e.Outcome != spool.OutcomeDelivered) {
			return fmt.Errorf("entry %+v", e)
		}
		return err
	})
	if err != nil {
		t.Fatalf("the entry in the kept database: %v", err)
	}
}
