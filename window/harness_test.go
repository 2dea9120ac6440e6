package window

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// env is the dispatcher's part for a Host under test: it counts what the
// Host keeps against a budget of messages, holds the reads the Host
// starts until the test runs them (as the dispatcher runs them off its
// lock, later), counts what is out (in flight), and records the wakes
// asked for. A stopping env starts no read, as a dispatcher that stops.
type env struct {
	w        *Host
	kept     int
	most     int
	budget   int             // messages all hosts may hold (Fits)
	out      int             // handed out and not yet done or back
	inFlight int             // requests handed out and not yet done
	reads    []func() func() // started, not yet run
	read     []func()        // run, not yet applied
	purged   map[uint64]bool
	wakes    []time.Time
	stopping bool
}

func (e *env) Keep(*spool.Message) {
	e.kept++
	e.most = max(e.most, e.kept)
}
func (e *env) Unkeep(*spool.Message)        { e.kept-- }
func (e *env) Fits(*spool.Message) bool     { return e.kept < e.budget }
func (e *env) Busy() int                    { return e.out }
func (e *env) InFlight() int                { return e.inFlight }
func (e *env) Purged(m *spool.Message) bool { return e.purged[m.ID] }
func (e *env) Wake(t time.Time)             { e.wakes = append(e.wakes, t) }
func (e *env) LoadSize() int {
	fit := e.budget - e.kept
	if e.w.Waiting() == 0 {
		fit = max(fit, e.w.pol.Stage)
	}
	return max(min(e.w.pol.Window-e.w.count(), fit), 0)
}
func (e *env) Read(read func() func()) bool {
	if e.stopping {
		return false
	}
	e.reads = append(e.reads, read)
	return true
}

// runReads runs the reads started so far, each read then applied, as the
// dispatcher does once a read slot is free and it has its lock again.
func (e *env) runReads() {
	for len(e.reads) > 0 {
		r := e.reads[0]
		e.reads = e.reads[1:]
		r()()
	}
}

// fixture is a real spool in a temporary directory and a Host on it,
// with a clock the test moves (clock: what the Host's reads are applied
// at, and when add enqueues and announces).
type fixture struct {
	t     testing.TB
	sp    *spool.Spool
	e     *env
	w     *Host
	clock time.Time
}

// t0 is when a fixture's clock starts.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const testHost = "p.example"

func newFixture(t testing.TB, pol Policy, budget int) *fixture {
	t.Helper()
	sp, err := spool.Open(spool.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	return newFixtureOn(t, sp, sp, pol, budget)
}

// newFixtureOn is newFixture with the Host reading through r.
func newFixtureOn(t testing.TB, sp *spool.Spool, r Reader, pol Policy, budget int) *fixture {
	e := &env{budget: budget, purged: map[uint64]bool{}}
	f := &fixture{t: t, sp: sp, e: e, clock: t0}
	f.w = New(Options{Name: testHost, Reader: r, Env: e, Policy: pol, Now: func() time.Time { return f.clock },
		Log: slog.New(slog.DiscardHandler)})
	e.w = f.w
	return f
}

// add appends a webhook to the spool and announces it, as the spool's
// Notify does once it is durable.
func (f *fixture) add(set func(m *spool.Message)) *spool.Message {
	f.t.Helper()
	m := &spool.Message{Host: testHost, Method: "POST", URL: "http://" + testHost + "/", Enqueued: f.clock,
		Body: []byte(`{}`)}
	if set != nil {
		set(m)
	}
	if err := f.sp.Append(context.Background(), m, 0); err != nil {
		f.t.Fatal(err)
	}
	f.w.Announce(m, f.clock)
	return m
}

// next hands out the next webhook as the dispatcher's pump does: a
// retry that is due, else the staged head; nil if there is none.
func (f *fixture) next(now time.Time) *spool.Message {
	p, _ := f.w.Next(now)
	if p.Empty() {
		return nil
	}
	ms, _ := f.w.Take(p)
	f.e.out += len(ms)
	f.e.inFlight++
	return ms[0]
}

// done settles m, delivered: gone from the spool and from the Host.
func (f *fixture) done(m *spool.Message) {
	f.t.Helper()
	if err := f.sp.Delete(m); err != nil {
		f.t.Fatal(err)
	}
	f.e.out--
	f.e.inFlight = max(f.e.inFlight-1, 0)
	f.e.Unkeep(m)
	f.w.Done(m)
}

// upkeep is the dispatcher's upkeep after a pump, its reads run.
func (f *fixture) upkeep(now time.Time) {
	f.w.Upkeep(now, time.Time{}, true)
	f.e.runReads()
}

func key(i int) string { return fmt.Sprint("key-", i) }

// readAhead starts the Host's reads and runs their reading half, leaving
// what they read to be applied later (applyReads), as a read does that
// waits for the dispatcher's lock; it returns how many reads it ran.
func (f *fixture) readAhead() int {
	f.w.Upkeep(f.clock, time.Time{}, true)
	for _, r := range f.e.reads {
		f.e.read = append(f.e.read, r())
	}
	f.e.reads = nil
	return len(f.e.read)
}

// applyReads applies what readAhead read.
func (f *fixture) applyReads() {
	for _, apply := range f.e.read {
		apply()
	}
	f.e.read = nil
	f.e.runReads()
}
