package deliver

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hookpace/hookpace/pacer"
	"github.com/hookpace/hookpace/spool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// attemptBatch sends the batch ms once, as one request, and applies the
// verdict to every member. It runs on its own goroutine, holding one of
// the host's slots.
func (d *Dispatcher) attemptBatch(h *host, ms []*spool.Message, pol Policy, sentAt time.Time, lease string) {
	defer d.wg.Done()
	for _, m := range ms {
		d.begin(h, m) // see coalesce.go: a member's content may be replaced
	}
	ms = d.keepBatchable(h, ms, sentAt, lease)
	if len(ms) == 0 {
		return
	}
	id, n := batchID(ms), 0
	links := make([]trace.Link, 0, len(ms))
	for _, m := range ms {
		n = max(n, m.Attempts+1)
		if sc := trace.SpanContextFromContext(d.traceParent(m.Header)); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	ctx, span := d.opts.Tracer.Start(d.ctx, "hookpace.deliver", trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithLinks(links...),
		trace.WithAttributes(
			attribute.String("hookpace.host", h.name),
			attribute.String("hookpace.message_id", id),
			attribute.Int("hookpace.attempt", n),
			attribute.Int("hookpace.batch_size", len(ms)),
		))
	res := d.post(ctx, pol, ms[0].Method, ms[0].URL, batchHeader(ms), encodeBatch(pol.Batch, ms), id, n)
	now := time.Now()
	res.verdict, res.outcome, res.reason = classify(res.status, res.err, pol.Retry4xx)
	res.scrub(pol.Auth)
	if len(ms) > 1 && tooLarge(res.status, res.answer) {
		res.verdict, res.reason = vSplit, fmt.Sprintf("status %d: too large, split in two", res.status)
	}
	for _, m := range ms {
		d.journalAttempt(m, res, now, len(ms))
	}
	d.autoPause(h.name, pol, res, now)
	if res.verdict == vDone {
		d.opts.Store.DeleteAll(ms) // as in attempt: the slot is kept until this is durable
	}

	d.mu.Lock()
	v, reason, next, dead := d.finishBatch(ctx, h, ms, pol, res, sentAt, now, lease)
	res.quotaUntil = d.partnerLocked(h, pol, res.partner, v, now)
	h.active = now
	d.slotDone(h)
	d.mu.Unlock()
	for _, m := range ms {
		d.end(m)
	}

	e := attemptEnd{host: h.name, id: id, enqueued: ms[0].Enqueued, n: n, res: res, v: v, reason: reason,
		next: next, now: now, webhooks: len(ms)}
	if v != vDead {
		e.dead = dead // members past max_age or max_attempts
	}
	d.attemptEnded(span, e)
}

// keepBatchable returns the members of ms that may still be batched. A
// member whose content was replaced by one that is not JSON (coalescing)
// goes back to the head of h's queue, to go alone; if none is left, the
// slot is given back unused.
func (d *Dispatcher) keepBatchable(h *host, ms []*spool.Message, sentAt time.Time, lease string) []*spool.Message {
	keep := make([]*spool.Message, 0, len(ms))
	var alone []*spool.Message
	for _, m := range ms {
		if batchable(m) {
			keep = append(keep, m)
		} else {
			alone = append(alone, m)
		}
	}
	if len(alone) == 0 {
		return ms
	}
	d.mu.Lock()
	for i := len(alone) - 1; i >= 0; i-- {
		h.ready.pushFront(alone[i])
		if h.fit != nil {
			h.fit[alone[i]] = -1
		}
	}
	h.extra -= len(alone)
	if len(keep) == 0 {
		h.extra++ // the slot's own message was among them
		pr := pacer.Result{Outcome: pacer.NoSend, SentAt: sentAt}
		h.gate.Release(time.Now(), lease, pr)
		d.slotDone(h)
	}
	d.mu.Unlock()
	for _, m := range alone {
		d.end(m)
	}
	return keep
}

// finishBatch applies a batch attempt's verdict to each member of ms and
// to h, as finish does for one message. It returns the request's verdict,
// the reason, when the members are due again, and how many members went
// to the dead letters although the request's verdict was not dead.
func (d *Dispatcher) finishBatch(ctx context.Context, h *host, ms []*spool.Message, pol Policy, res result, sentAt, now time.Time, lease string) (verdict, string, time.Time, int) {
	h.extra -= len(ms) - 1
	if d.abandoned(h, res, sentAt, now, lease) {
		for _, m := range ms {
			d.release(h, m) // they stay queued on disk for the next start
		}
		return vRetry, "abandoned at shutdown", time.Time{}, 0
	}
	hold, ra, hasRA := d.settle(h, pol, res, sentAt, now, lease)
	if res.verdict == vSplit { // not an attempt: the members are not judged
		h.split(ms, now)
		d.opts.Observer.Delivery(ctx, h.name, vSplit)
		d.opts.Observer.BatchWebhooks(ctx, h.name, vSplit, len(ms))
		return vSplit, res.reason, time.Time{}, 0
	}
	var held, retry []*spool.Message
	counts := make(map[verdict]int, 2)
	attempts := 0
	for _, m := range ms {
		v, _ := d.judge(h, m, pol, res, now)
		counts[v]++
		switch v {
		case vDone:
			d.countDelivered(h, 1)
			d.opts.Observer.DeliveryLatency(ctx, h.name, now.Sub(m.Enqueued))
		case vHold:
			held = append(held, m)
		case vRetry:
			retry = append(retry, m)
			attempts = max(attempts, m.Attempts)
		}
	}
	var next time.Time
	if len(held) > 0 {
		// First in line again when the hold ends, in their order.
		for _, m := range slices.Backward(held) {
			h.ready.pushFront(m)
		}
		next = d.held(h, pol, hold)
	}
	if len(retry) > 0 {
		next = now.Add(retryDelay(attempts, pol, res, ra, hasRA))
		h.retry.addBatch(next, retry)
	}
	if res.verdict == vDone {
		h.batches.requests++
		h.batches.webhooks += int64(len(ms))
	}
	d.opts.Observer.Delivery(ctx, h.name, res.verdict)
	for v, n := range counts {
		if n > 0 {
			d.opts.Observer.BatchWebhooks(ctx, h.name, v, n)
		}
	}
	dead := counts[vDead]
	if res.verdict == vDead {
		dead = 0
	}
	return res.verdict, res.reason, next, dead
}
