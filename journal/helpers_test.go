package journal

import (
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// testOpts are a test's options: the spool's it sets, and the journal's.
type testOpts struct {
	Dir      string
	MaxBytes int64
	MinFree  int64
	Logger   *slog.Logger
	Now      func() time.Time
	DiskFree func(dir string) (int64, error)
	Journal  Options
	// journalLinger is Options.linger.
	journalLinger time.Duration
}

// journals are the journals of the spools openTest opened.
var journals sync.Map // *spool.Spool -> *Journal

// openTest opens a spool in dir with its journal, as hookpace does.
func openTest(t testing.TB, dir string, o testOpts) *spool.Spool {
	t.Helper()
	s, err := openSpool(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func openSpool(dir string, o testOpts) (*spool.Spool, error) {
	jo := o.Journal
	jo.linger = o.journalLinger
	s, j, err := OpenSpool(spool.Options{Dir: dir, MaxBytes: o.MaxBytes, MinFree: o.MinFree, Logger: o.Logger,
		Now: o.Now, DiskFree: o.DiskFree}, jo)
	if err == nil {
		o.Dir = dir
		journals.Store(s, j)
		opened.Store(s, o)
	}
	return s, err
}

// opened are the options openTest opened each spool with.
var opened sync.Map // *spool.Spool -> testOpts

// optsOf is what openTest opened s with, its Dir set.
func optsOf(s *spool.Spool) testOpts {
	o, _ := opened.Load(s)
	return o.(testOpts)
}

// journalOf is the journal of a spool openTest opened.
func journalOf(s *spool.Spool) *Journal {
	j, _ := journals.Load(s)
	return j.(*Journal)
}

func newMsg(host string, i int) *spool.Message {
	return &spool.Message{
		Host:     host,
		Method:   "POST",
		URL:      "http://" + host + "/hook",
		Header:   http.Header{"Content-Type": {"application/json"}, "X-Seq": {fmt.Sprint(i)}},
		Body:     []byte(fmt.Sprintf(`{"n":%d}`, i)),
		Enqueued: time.Unix(1700000000, int64(i)),
	}
}

// checkAcrossRestart runs check on s, closes it, opens dir again and runs
// check there too: what the journal says survives a restart. It returns
// the spool opened again, closed when the test ends.
func checkAcrossRestart(t *testing.T, dir string, s *spool.Spool, check func(*spool.Spool)) *spool.Spool {
	t.Helper()
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, testOpts{})
	t.Cleanup(func() { s.Close() })
	check(s)
	return s
}
