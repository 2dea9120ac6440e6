package deliver

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestMaxInFlightBoundsAllHosts: 20 hosts with room for 4 attempts each
// share 4 slots. No more than 4 requests are ever at the partners at
// once, every webhook arrives, and the hosts take turns: a freed slot goes
// to the host waiting longest. Without the turns, a host whose attempt
// ends takes its slot back and sends its whole queue first.
func TestMaxInFlightBoundsAllHosts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const hosts, each, slots = 20, 10, 4
		var mu sync.Mutex
		now, most := 0, 0
		rc := &receiver{handle: func(r *http.Request, n int) (int, http.Header) {
			mu.Lock()
			now++
			most = max(most, now)
			mu.Unlock()
			time.Sleep(100 * time.Millisecond)
			mu.Lock()
			now--
			mu.Unlock()
			return 200, nil
		}}
		q := newMemQueue()
		d := New(Options{Reader: q, Store: q, Stats: q, Journal: q, Policy: fixed(policy(1000, 100, 4)),
			Client: &http.Client{Transport: rc}, Logger: slog.New(slog.DiscardHandler), MaxInFlight: slots})
		for i := range hosts {
			q.add(fmt.Sprintf("h%02d.example", i), each)
		}
		if err := d.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Stop(context.Background()) })
		waitEmpty(t, q, time.Minute)
		if most != slots {
			t.Errorf("at most %d requests at once, want %d (delivery.max_in_flight)", most, slots)
		}
		got := rc.arrivals("")
		if len(got) != hosts*each {
			t.Fatalf("%d arrivals, want %d", len(got), hosts*each)
		}
		// Until every host has sent its first, none sends more than the
		// 4 a host may start at once while slots are free, and one more:
		// the first host joins the wait first, when it finds no 5th slot.
		seen := map[string]int{}
		for i, a := range got {
			if len(seen) == hosts {
				break
			}
			if seen[a.host]++; seen[a.host] > 5 {
				t.Fatalf("arrival %d is %s's %d-th while %d hosts had sent nothing: hosts must take turns at the slots",
					i, a.host, seen[a.host], hosts-len(seen))
			}
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.inFlight != 0 || d.slotQ.len() != 0 {
			t.Errorf("after the queue emptied: %d slots taken, %d hosts waiting", d.inFlight, d.slotQ.len())
		}
	})
}

// TestWaitingForSlotKeepsTokens: a host that waits for a slot does not
// spend a token on it, so once it gets one it still has its burst.
func TestWaitingForSlotKeepsTokens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		rc := &receiver{handle: func(r *http.Request, n int) (int, http.Header) {
			if r.URL.Host == "busy.example" {
				<-release
			}
			return 200, nil
		}}
		q := newMemQueue()
		pols := map[string]Policy{"busy.example": policy(1000, 100, 1), "slow.example": policy(0.001, 3, 4)}
		d := New(Options{Reader: q, Store: q, Stats: q, Journal: q, Policy: func(h string) *Policy { p := pols[h]; return &p },
			Client: &http.Client{Transport: rc}, Logger: slog.New(slog.DiscardHandler), MaxInFlight: 1})
		q.add("busy.example", 1)
		if err := d.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Stop(context.Background()) })
		synctest.Wait()
		q.add("slow.example", 3) // 3 tokens, and about one an hour after them
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := len(rc.arrivals("slow.example")); n != 0 {
			t.Fatalf("slow.example sent %d while the one slot was taken", n)
		}
		for _, st := range d.Hosts() {
			if want := st.Host == "slow.example"; st.WaitingForSlot != want {
				t.Errorf("%s: waiting_for_slot %v, want %v", st.Host, st.WaitingForSlot, want)
			}
		}
		close(release)
		time.Sleep(time.Second)
		synctest.Wait()
		if n := len(rc.arrivals("slow.example")); n != 3 {
			t.Fatalf("slow.example sent %d of its burst of 3 once the slot was free, want 3", n)
		}
	})
}
