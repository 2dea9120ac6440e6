package deliver

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// perMsg is what one of the test's webhooks costs held in memory: its
// 1 KiB body and about as much again decoded (msgOverhead).
const perMsg = 2 << 10

// held is how many messages d holds in memory over all hosts, and what
// they take.
func held(d *Dispatcher) (msgs int, bytes int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, h := range d.hosts {
		msgs += h.count()
	}
	return msgs, int64(msgs) * perMsg
}

// 40 webhooks of 1 KiB each for 500 hosts at 1/m. What the
// dispatcher holds stays within MaxBuffered, give or take one webhook a
// host, as the webhooks arrive and all the while they are delivered; and
// every host gets all of its webhooks delivered.
func TestBufferBoundHoldsOverManyHosts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const hosts, each, maxBuffered = 500, 40, 1 << 20
		rc := &receiver{}
		pols := map[string]Policy{}
		for i := range hosts {
			pols[fmt.Sprintf("h%d.example", i)] = policy(1.0/60, 1, 1)
		}
		d, q := setup(t, rc, pols, maxBuffered)
		bound := int64(maxBuffered + hosts*perMsg)
		body := bytes.Repeat([]byte("x"), 1<<10)
		for range each {
			var ms []*spool.Message
			for i := range hosts {
				host := fmt.Sprintf("h%d.example", i)
				ms = append(ms, &spool.Message{Host: host, Method: "POST", URL: "http://" + host + "/hook",
					Header: http.Header{"Content-Type": {"application/json"}}, Body: body})
			}
			q.put(ms...)
			synctest.Wait()
		}
		for start := time.Now(); q.left() > 0; {
			if time.Since(start) > 2*time.Hour {
				t.Fatalf("%d left after 2h at 1/m", q.left())
			}
			if n, b := held(d); b > bound {
				t.Fatalf("%d webhooks (%d KiB) held for %d hosts with %d queued, want at most %d KiB",
					n, b>>10, hosts, q.left(), bound>>10)
			}
			time.Sleep(time.Minute)
			synctest.Wait()
		}
		if got := len(rc.arrivals("")); got != hosts*each {
			t.Fatalf("%d delivered, want %d", got, hosts*each)
		}
	})
}
