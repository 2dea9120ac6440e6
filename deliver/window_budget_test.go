package deliver

import (
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// TestManyKeysWithinWindow: a host with 100,000 fairness keys, one
// webhook each, announced while it is paused and then after a restart,
// never holds more webhooks in memory than its window.
func TestManyKeysWithinWindow(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprint("restart=", restart), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pol := policy(1, 1, 1) // blocked too briefly to spill
				q := newMemQueue()
				add := func() {
					q.addLaned("p.example", "k", 100_000, func(i int, m *spool.Message) { m.Fairness = fmt.Sprint("key-", i) })
				}
				var d *Dispatcher
				if restart {
					add()
					d = startWith(t, q, pol, &http.Client{Transport: &receiver{}})
				} else {
					d = startWith(t, q, pol, &http.Client{Transport: &receiver{}})
					add()
				}
				most := int64(0)
				for range 50 {
					time.Sleep(100 * time.Millisecond)
					synctest.Wait()
					d.mu.Lock()
					most = max(most, d.bufferedN)
					d.mu.Unlock()
				}
				d.mu.Lock()
				w := d.hosts["p.example"].window()
				d.mu.Unlock()
				if most > int64(w) {
					t.Fatalf("the host held up to %d webhooks, window %d", most, w)
				}
				t.Logf("held at most %d webhooks, window %d", most, w)
			})
		})
	}
}
