package spool

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestRefText(t *testing.T) {
	r := Ref{Spool: 0x3f2a9c1e7b4d5a60, Seq: 0x2a}
	if s := r.String(); s != "3f2a9c1e7b4d5a60000000000000002a" {
		t.Fatalf("String() = %q", s)
	}
	for _, tt := range []struct {
		in   string
		want Ref
		err  bool
	}{
		{in: "3f2a9c1e7b4d5a60000000000000002a", want: r},
		{in: "000000000000002a", want: Ref{Seq: 0x2a}},
		{in: "2a", want: Ref{Seq: 0x2a}},
		{in: "3f2a9c1e7b4d5a600000000000000000", err: true}, // no such sequence
		{in: "0", err: true},
		{in: "", err: true},
		{in: "3f2a9c1e7b4d5a60000000000000002", err: true}, // 31 digits
		{in: "xyz", err: true},
	} {
		got, err := ParseRef(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseRef(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
	if !(Ref{Seq: 0x2a}).Matches(r) || !r.Matches(r) || (Ref{Spool: 1, Seq: 0x2a}).Matches(r) || (Ref{Seq: 0x2b}).Matches(r) {
		t.Error("Matches: a short id matches any spool's, a whole one only its own")
	}
	if s := (Ref{Seq: 0x2a}).String(); s != "000000000000002a" {
		t.Errorf("a Ref without its spool part prints %q, want the short form", s)
	}
}

// Two spools, as two sidecars have, give their first webhooks different
// ids; a spool keeps its identity across a restart.
func TestRefsDifferAcrossSpools(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	a, b := openTest(t, dirA, Options{}), openTest(t, dirB, Options{})
	ma, mb := newMsg("p.example", 1), newMsg("p.example", 1)
	for _, x := range []struct {
		s *Spool
		m *Message
	}{{a, ma}, {b, mb}} {
		if err := x.s.Append(context.Background(), x.m, 0); err != nil {
			t.Fatal(err)
		}
	}
	if ma.ID != mb.ID || ma.Ref() == mb.Ref() {
		t.Fatalf("ids %d and %d, Refs %v and %v: want the same sequence, different Refs", ma.ID, mb.ID, ma.Ref(), mb.Ref())
	}
	if len(ma.Ref().String()) != 32 || !strings.HasSuffix(ma.Ref().String(), IDString(ma.ID)) {
		t.Fatalf("Ref %q", ma.Ref())
	}
	inst := a.Instance()
	a.Close()
	b.Close()
	a = openTest(t, dirA, Options{})
	defer a.Close()
	if a.Instance() != inst {
		t.Fatalf("the spool's identity changed across a restart: %x -> %x", inst, a.Instance())
	}
	got, err := a.Read("p.example", 0, 10)
	if err != nil || len(got) != 1 || got[0].Ref() != ma.Ref() {
		t.Fatalf("read back %v (%v), want Ref %v", got, err, ma.Ref())
	}
}

// A webhook handed off by another hookpace keeps its Ref in this spool,
// through a restart, its dead letter and a replay.
func TestHandedOffKeepsItsRef(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{})
	origin := Ref{Spool: 0x1122334455667788, Seq: 0x99}
	m := newMsg("p.example", 1)
	m.Origin, m.OriginSpool = origin.Seq, origin.Spool
	if err := s.Append(context.Background(), m, 0); err != nil {
		t.Fatal(err)
	}
	if m.Ref() != origin {
		t.Fatalf("Ref %v, want the origin's %v", m.Ref(), origin)
	}
	s.Bury(m, "permanent status 410", time.Now())
	s.Close()
	s = openTest(t, dir, Options{})
	defer s.Close()
	dead, _, err := s.ListDead(DeadFilter{IDs: []Ref{origin}}, 0)
	if err != nil || len(dead) != 1 || dead[0].Message.Ref() != origin {
		t.Fatalf("dead letters by the origin's id: %v, %v", dead, err)
	}
	if n, err := s.ReplayDead(DeadFilter{IDs: []Ref{{Spool: s.Instance(), Seq: origin.Seq}}}); n != 0 || err != nil {
		t.Fatalf("this spool's id with the origin's sequence replayed %d (%v), want none", n, err)
	}
	if n, err := s.ReplayDead(DeadFilter{IDs: []Ref{origin}}); n != 1 || err != nil {
		t.Fatalf("replay: %d, %v", n, err)
	}
	got, err := s.Read("p.example", 0, 10)
	if err != nil || len(got) != 1 || got[0].Ref() != origin {
		t.Fatalf("replayed: %v (%v), want Ref %v", got, err, origin)
	}
}

// A claimed origin on the spool itself is dropped: the webhook gets its
// own id, never one the spool hands out.
func TestOriginOnOwnSpoolIsDropped(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	defer s.Close()
	m := newMsg("p.example", 1)
	m.Origin, m.OriginSpool = 7, s.Instance()
	if err := s.Append(context.Background(), m, 0); err != nil {
		t.Fatal(err)
	}
	if want := (Ref{Spool: s.Instance(), Seq: m.ID}); m.Ref() != want || m.Origin != 0 {
		t.Fatalf("Ref %v (origin %d), want its own %v", m.Ref(), m.Origin, want)
	}
}
