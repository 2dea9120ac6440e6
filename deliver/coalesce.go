package deliver

import "github.com/hookpace/hookpace/spool"

// inFlight is a QueueStore that coalesces updates of queued webhooks (issue
// 20); *spool.Spool is one. Begin, before an attempt, keeps the message
// from being replaced until End and gives it the last content accepted;
// End comes once the attempt's outcome has been submitted.

// begin announces an attempt of m to the queue, off the dispatcher's
// lock: it may wait for a replacement of m being written.
func (d *Dispatcher) begin(h *host, m *spool.Message) {
	if grew := d.opts.Store.Begin(m); grew != 0 {
		d.mu.Lock()
		d.grew(h, grew)
		d.mu.Unlock()
	}
}

// end tells the queue that the attempt begin announced is over.
func (d *Dispatcher) end(m *spool.Message) {
	d.opts.Store.End(m)
}

// coalesced is how many webhooks for host replaced a queued one.
func (d *Dispatcher) coalesced(host string) int64 {
	return d.opts.Stats.HostCoalesced(host)
}
