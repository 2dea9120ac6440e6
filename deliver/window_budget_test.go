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

// TestPlainHostCarriesNoLaneMaps: a host whose webhooks carry no key,
// priority or ordering key holds its default lane alone, without the
// maps of lanes, keys, ordering keys and webhooks out; its first keyed
// webhook and its first ordered one make them.
func TestPlainHostCarriesNoLaneMaps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &receiver{}
		q := newMemQueue()
		d := startWith(t, q, policy(1000, 10, 2), &http.Client{Transport: rc})
		maps := func() (lanes, units, order bool) {
			d.mu.Lock()
			defer d.mu.Unlock()
			ls := d.hosts["p.example"].lanes
			return ls.lanes != nil || ls.outs != nil, ls.units != nil, ls.order != nil
		}
		q.add("p.example", 20)
		waitEmpty(t, q, time.Minute)
		if l, u, o := maps(); l || u || o {
			t.Fatalf("a plain host made lane maps: lanes %v, keys %v, ordering keys %v", l, u, o)
		}
		q.addLaned("p.example", "k", 3, func(i int, m *spool.Message) { m.Fairness = fmt.Sprint("tenant-", i) })
		waitEmpty(t, q, time.Minute)
		if l, u, _ := maps(); !l || !u {
			t.Fatalf("keyed webhooks made no lane maps: lanes %v, keys %v", l, u)
		}
		q.addLaned("p.example", "o", 3, func(i int, m *spool.Message) { m.Ordering = "order-1" })
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		if _, _, o := maps(); !o {
			t.Fatal("ordered webhooks made no map of ordering keys")
		}
		waitEmpty(t, q, time.Minute)
		if n := len(rc.arrivals("p.example")); n != 26 {
			t.Fatalf("%d webhooks arrived, want 26", n)
		}
	})
}
