package memtarget

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
)

func TestLimit(t *testing.T) {
	const MiB = 1 << 20
	for _, c := range []struct{ target, live, other, want int64 }{
		{96 * MiB, 20 * MiB, 10 * MiB, 96 * MiB},  // small heap: the target
		{96 * MiB, 60 * MiB, 10 * MiB, 100 * MiB}, // 1.5 x live + other passes it
		{96 * MiB, 200 * MiB, 30 * MiB, 330 * MiB},
	} {
		if got := Limit(c.target, c.live, c.other); got != c.want {
			t.Errorf("Limit(%d, %d, %d) = %d MiB, want %d MiB", c.target/MiB, c.live/MiB, c.other/MiB, got/MiB, c.want/MiB)
		}
	}
}

// TestFollowsLiveHeap: with a target far below what is live, the limit
// set after a collection leaves room for half the live heap again, so
// the collector never runs back to back; turning the target off lifts
// the limit.
func TestFollowsLiveHeap(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	defer Set(0)
	keep := make([][]byte, 64)
	for i := range keep {
		keep[i] = make([]byte, 1<<20) // 64 MiB live
	}
	if !Set(8 << 20) {
		t.Fatal("Set refused without GOMEMLIMIT")
	}
	runtime.GC()
	adjust() // what the sentinel's finalizer does after each collection, on its own goroutine
	lim := debug.SetMemoryLimit(-1)
	if lim < 96<<20 {
		t.Errorf("limit %d MiB with 64 MiB live, want at least 96 MiB (1.5 x live)", lim>>20)
	}
	runtime.KeepAlive(keep)
	Set(0)
	if lim := debug.SetMemoryLimit(-1); lim != math.MaxInt64 {
		t.Errorf("limit %d after Set(0), want none", lim)
	}
}

func TestGOMEMLIMITWins(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "100MiB")
	before := debug.SetMemoryLimit(-1)
	if Set(8 << 20) {
		t.Error("Set applied a target although GOMEMLIMIT is set")
	}
	if after := debug.SetMemoryLimit(-1); after != before {
		t.Errorf("limit changed from %d to %d", before, after)
	}
}
