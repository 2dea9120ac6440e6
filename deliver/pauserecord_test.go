package deliver

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// A resume (or pause) made while the disk is too full to record it
// applies at once, and is recorded once the disk has room, so that a
// restart keeps it; a later change recorded in the meantime wins.
func TestPauseChangeRecordedWhenSpaceReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newMemQueue()
		d := New(Options{Reader: q, Store: q, Stats: q, Journal: q, Policy: fixed(policy(100, 10, 2)),
			Client: &http.Client{Transport: &receiver{}}, Logger: slog.New(slog.DiscardHandler)})
		if err := d.Start(); err != nil {
			t.Fatal(err)
		}
		defer d.Stop(context.Background())
		full := func(on bool) {
			q.mu.Lock()
			defer q.mu.Unlock()
			q.pauseErr = nil
			if on {
				q.pauseErr = fmt.Errorf("record pause: %w", spool.ErrDiskFull)
			}
		}
		recorded := func() string {
			got, _ := q.Paused()
			return fmt.Sprint(got)
		}
		if err := d.Pause("p.example"); err != nil {
			t.Fatal(err)
		}
		full(true)
		if ok, err := d.Resume("p.example"); !ok || err != nil {
			t.Fatalf("resume on a full disk: %v, %v", ok, err)
		}
		if err := d.Pause("r.example"); err != nil {
			t.Fatalf("pause on a full disk: %v", err)
		}
		if st, _ := d.Host("p.example"); st.Paused {
			t.Fatal("the resume did not apply at once")
		}
		time.Sleep(10 * recordRetryEvery)
		synctest.Wait()
		if got := recorded(); got != "[p.example]" {
			t.Fatalf("recorded %s with the disk still full, want [p.example] (nothing written)", got)
		}
		full(false)
		if ok, err := d.Resume("r.example"); !ok || err != nil { // recorded at once: the pending pause is moot
			t.Fatalf("resume: %v, %v", ok, err)
		}
		time.Sleep(recordRetryEvery)
		synctest.Wait()
		if got := recorded(); got != "[]" {
			t.Fatalf("recorded pauses %s once space returned, want none: the resume recorded, the pause superseded", got)
		}
		if st, _ := d.Host("r.example"); st.Paused {
			t.Fatal("r.example paused again by a stale record")
		}
	})
}
