package deliver

import (
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

// TestBlockedHostHoldsNothing: a host whose tokens refill at 1/h holds
// no message in memory while it waits for the next (its retry and its
// next webhook wait on disk), and still sends each once, in order, a
// retry with its attempts counted, when its tokens come.
func TestBlockedHostHoldsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, q, rc := slowFailingOnce(t)
		q.add("slow.example", 3)
		time.Sleep(time.Minute)
		synctest.Wait()
		d.mu.Lock()
		held, n := d.buffered, d.bufferedN
		d.mu.Unlock()
		if n != 0 || held != 0 {
			t.Fatalf("a host that can't send for an hour holds %d messages (%d bytes)", n, held)
		}
		q.add("slow.example", 1) // an arrival meanwhile stays on disk too
		synctest.Wait()
		d.mu.Lock()
		n = d.bufferedN
		d.mu.Unlock()
		if n != 0 {
			t.Fatalf("after an arrival, the blocked host holds %d messages", n)
		}
		waitEmpty(t, q, 5*time.Hour)
		var paths []string
		for _, a := range rc.arrivals("") {
			paths = append(paths, a.path)
		}
		if got := fmt.Sprint(paths); got != "[/hook/0 /hook/0 /hook/1 /hook/2 /hook/0]" {
			t.Fatalf("arrivals %s", got)
		}
		if got := rc.arrivals("")[1].hdr.Get("X-Attempt"); got != "2" {
			t.Fatalf("the retry, read again from the spool, went as attempt %q, want 2", got)
		}
	})
}

// TestBlockedLanedHostHoldsNothing: the same for a host with fairness
// keys: what its lanes held waits on disk while it can't send, and every
// webhook is still sent once (the failed one twice, its retry as attempt
// 2), the keys taking turns.
func TestBlockedLanedHostHoldsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, q, rc := slowFailingOnce(t)
		for _, k := range []string{"a", "b", "c"} {
			q.addLaned("slow.example", k, 2, fairKey(k))
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		d.mu.Lock()
		held, n := d.buffered, d.bufferedN
		d.mu.Unlock()
		if n != 0 || held != 0 {
			t.Fatalf("a laned host that can't send for an hour holds %d messages (%d bytes)", n, held)
		}
		waitEmpty(t, q, 8*time.Hour)
		as := rc.arrivals("")
		var paths []string
		for _, a := range as {
			paths = append(paths, a.path)
		}
		if got := fmt.Sprint(paths); got != "[/a/0 /a/0 /b/0 /c/0 /a/1 /b/1 /c/1]" {
			t.Fatalf("arrivals %s", got)
		}
		if got := as[1].hdr.Get("X-Attempt"); got != "2" {
			t.Fatalf("the retry, read again from the spool, went as attempt %q, want 2", got)
		}
	})
}

// slowFailingOnce is a dispatcher whose host slow.example gets a token an
// hour (one at first) and one send at a time, in front of a receiver that
// answers its first request 500 and every other 200; attempts are counted
// in X-Attempt.
func slowFailingOnce(t *testing.T) (*Dispatcher, *memQueue, *receiver) {
	failed := false
	rc := &receiver{handle: func(r *http.Request, n int) (int, http.Header) {
		if !failed {
			failed = true
			return 500, nil
		}
		return 200, nil
	}}
	pol := policy(1.0/3600, 1, 1)
	pol.AttemptHeader = "X-Attempt"
	d, q := setup(t, rc, map[string]Policy{"slow.example": pol}, 0)
	return d, q, rc
}
