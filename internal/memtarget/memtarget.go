// Package memtarget keeps a Go process's memory near a target without
// letting the garbage collector run away (memory.target).
//
// By default (GOGC=100) the Go heap grows to twice what was live at the
// last collection before the next one starts. For hookpace that headroom
// was most of its memory: 200,000 webhooks queued over 5,000 hosts kept
// ~55 MB live during ingest, and the heap grew past 110 MB. A
// plain memory limit (GOMEMLIMIT) holds the heap down, but once what is
// live nears the limit the collector runs back to back, up to half the
// CPU. So the limit set here follows what is live: after every collection
// it is the target, or 1.5 times the live heap plus the runtime's other
// memory (stacks, metadata) if that is more. Below the target the
// collector runs as it would without one; above it, at most about as often as
// GOGC=50 would make it (the heap's fragmentation counts against the
// limit too), never back to back.
//
// A GOMEMLIMIT in the environment is the operator's choice and wins: then
// the target is not applied.
package memtarget

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

var (
	// mu orders the target's changes and the limits set from it, so that
	// the limit in force always follows the latest target: an adjust
	// that began before Set(0) cannot put a limit back after it.
	mu     sync.Mutex
	target atomic.Int64 // bytes; 0: not applied
	armed  atomic.Bool  // a sentinel waits for the next collection
)

// Set applies target (bytes) from now on; 0 turns it off and lifts the
// limit. It reports false, and does nothing, when GOMEMLIMIT is set.
func Set(bytes int64) bool {
	if os.Getenv("GOMEMLIMIT") != "" {
		return false
	}
	mu.Lock()
	target.Store(max(bytes, 0))
	if bytes <= 0 {
		debug.SetMemoryLimit(math.MaxInt64)
		mu.Unlock()
		return true
	}
	mu.Unlock()
	if armed.CompareAndSwap(false, true) {
		arm()
	}
	adjust()
	return true
}

// sentinel's finalizer runs after every collection that finds it
// unreachable, that is after each one, since each arms a new sentinel.
type sentinel struct{ _ *int } // a pointer: never tiny-allocated with others

func arm() {
	runtime.SetFinalizer(&sentinel{}, func(*sentinel) {
		if target.Load() > 0 {
			adjust()
			arm()
		} else {
			armed.Store(false) // Set arms again
		}
	})
}

// adjust sets the memory limit from the target and the last collection.
func adjust() {
	mu.Lock()
	defer mu.Unlock()
	t := target.Load()
	if t <= 0 {
		return
	}
	samples := []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
	}
	metrics.Read(samples)
	v := func(i int) int64 { return int64(samples[i].Value.Uint64()) }
	live := v(0)
	heap := v(3) + v(4) + v(5)
	other := max(v(1)-v(2)-heap, 0) // stacks, GC metadata, the runtime's own
	debug.SetMemoryLimit(Limit(t, live, other))
}

// Limit is the memory limit for target given what the last collection
// found live on the heap and the runtime's memory besides the heap.
func Limit(target, live, other int64) int64 {
	return max(target, live+live/2+other)
}
