package proxy

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/hookpace/hookpace/handoff"
	"github.com/hookpace/hookpace/spool"
)

// A hand-off sends an ordering key's webhooks as one batch (see
// handoff.BatchHeader): each chunk is judged as any webhook is (its
// signature, its host's policy, its lane), then held here in memory,
// stored nowhere, until the batch's last chunk; that one stores them all,
// in their order, and is answered 202 once every one is durable. So no
// webhook of a key is released for delivery here before the whole key
// has come, and a hand-off cut short leaves the key with its sender
// whole. A batch that stops coming is dropped after stagingIdle.

// Bounds of what is staged: every batch's webhooks together, and how
// long a batch may wait for its next chunk.
const (
	maxStaged   = 256 << 20
	stagingIdle = 2 * time.Minute
	// maxStored is how many stored batches are remembered, so that a
	// last chunk sent again (its 202 was lost) is answered again, not
	// stored twice.
	maxStored = 4096
)

// A checked claim keys the webhook it names for handoffWindow, in a scope
// of its own, when it has no idempotency key of the app's: a key sent
// again after this hookpace stored part of it (its commit was cut by a
// crash) keeps the ones stored and appends only the rest, after them.
const (
	handoffWindow = time.Hour
	handoffScope  = "\x02handoff"
)

// batches are the hand-off batches being received.
type batches struct {
	mu     sync.Mutex
	open   map[string]*inBatch // by sender and batch id
	bytes  int64               // staged, over every batch
	swept  time.Time           // when idle batches were last dropped
	stored map[string]storedBatch
	order  []string // stored's keys, oldest first
}

// inBatch is one batch being received. Its mu is held while a chunk is
// staged or the batch stored; the rest is the batches' (under their mu).
type inBatch struct {
	mu      sync.Mutex
	hooks   []stagedHook
	bytes   int64
	seen    time.Time
	dropped bool
}

// stagedHook is a webhook judged and waiting for its batch's end.
type stagedHook struct {
	m    *spool.Message
	hp   HostPolicy
	keys spool.Keys
}

// storedBatch is a batch stored: the last one's id, and how many.
type storedBatch struct {
	id string
	n  int
}

// find returns the batch name is, a new one for a first chunk; or, for a
// batch stored already, what it stored.
func (bs *batches) find(name string, b handoff.Batch, now time.Time) (*inBatch, *storedBatch) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if now.Sub(bs.swept) > stagingIdle/8 {
		bs.swept = now
		for k, ib := range bs.open {
			if now.Sub(ib.seen) > stagingIdle {
				bs.dropLocked(k, ib)
			}
		}
	}
	if sb, ok := bs.stored[name]; ok {
		return nil, &sb
	}
	ib := bs.open[name]
	if ib == nil && b.N == 0 {
		if bs.open == nil {
			bs.open = map[string]*inBatch{}
		}
		ib = &inBatch{}
		bs.open[name] = ib
	}
	if ib != nil {
		ib.seen = now
	}
	return ib, nil
}

// reserve takes room for size more bytes in ib, if the bounds allow.
func (bs *batches) reserve(ib *inBatch, size int64) bool {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if bs.bytes+size > maxStaged || ib.bytes+size > handoff.MaxBatchBytes+(1<<20) {
		return false
	}
	bs.bytes += size
	ib.bytes += size
	return true
}

// drop forgets ib and gives its room back.
func (bs *batches) drop(name string, ib *inBatch) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	bs.dropLocked(name, ib)
}

func (bs *batches) dropLocked(name string, ib *inBatch) {
	if ib.dropped {
		return
	}
	ib.dropped = true
	bs.bytes -= ib.bytes
	if bs.open[name] == ib {
		delete(bs.open, name)
	}
}

// isDropped says ib was stored or dropped while a chunk waited for it.
func (bs *batches) isDropped(ib *inBatch) bool {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	return ib.dropped
}

// remember records that name stored n webhooks, the last as id.
func (bs *batches) remember(name, id string, n int) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if bs.stored == nil {
		bs.stored = map[string]storedBatch{}
	}
	bs.stored[name] = storedBatch{id: id, n: n}
	bs.order = append(bs.order, name)
	if len(bs.order) > maxStored {
		delete(bs.stored, bs.order[0])
		bs.order = bs.order[1:]
	}
}

// handoffBatch takes m, judged and ready to store, as a chunk of the
// hand-off batch its request names: staged (200, with how many the batch
// holds), or, for the batch's last chunk, stored with the rest (202, with
// how many). A chunk of a batch this hookpace does not hold, or out of
// its place, is a 409: the sender sends the key again, as a new batch.
func (p *Proxy) handoffBatch(ctx context.Context, r *http.Request, pol *Policy, m *spool.Message, hp HostPolicy, keys spool.Keys) decision {
	v := r.Header.Get(handoff.BatchHeader)
	b, err := handoff.ParseBatch(v)
	if err != nil {
		return badRequest(err.Error())
	}
	claim := r.Header.Get(handoff.Header)
	if claim == "" {
		return badRequest(handoff.BatchHeader + " without " + handoff.Header)
	}
	if pol.HandoffSecret != nil {
		if err := handoff.VerifyBatch(pol.HandoffSecret, r.Header.Get(handoff.BatchSignatureHeader), claim, v); err != nil {
			return decision{outcome: outcomeRefused, status: http.StatusForbidden, reason: err.Error() + "; not stored"}
		}
	}
	name := handoff.From(claim) + "/" + b.ID
	ib, done := p.batches.find(name, b, time.Now())
	if done == nil && ib != nil {
		ib.mu.Lock()
		defer ib.mu.Unlock()
		if p.batches.isDropped(ib) {
			// Stored, or dropped, while this chunk waited for it.
			ib = nil
			_, done = p.batches.find(name, handoff.Batch{N: -1}, time.Now())
		}
	}
	switch {
	case done != nil && b.Last:
		return storedAnswer(done.id, done.n)
	case ib == nil:
		return decision{outcome: outcomeRefused, label: "handoff_batch_unknown", status: http.StatusConflict,
			reason: fmt.Sprintf("hand-off batch %s: chunk %d, but this hookpace holds none of it (it restarted, or the batch "+
				"waited past %v): send the key again as a new batch", b.ID, b.N, stagingIdle)}
	}
	switch n := len(ib.hooks); {
	case b.N == n:
		size := int64(len(m.Body)) + int64(headerBytes(m.Header)) + 512
		if !p.batches.reserve(ib, size) {
			p.batches.drop(name, ib)
			return decision{outcome: outcomeError, status: http.StatusServiceUnavailable,
				reason: fmt.Sprintf("hand-off batch %s: past what this hookpace stages (%d MiB per key, %d MiB in all): "+
					"the key stays with its sender", b.ID, handoff.MaxBatchBytes>>20, maxStaged>>20)}
		}
		ib.hooks = append(ib.hooks, stagedHook{m: m, hp: hp, keys: keys})
	case b.N == n-1:
		// The chunk staged last, sent again: its answer was lost, or it
		// ends the batch.
	default:
		return decision{outcome: outcomeRefused, label: "handoff_batch_unknown", status: http.StatusConflict,
			reason: fmt.Sprintf("hand-off batch %s: chunk %d, but it holds %d: send the key again as a new batch", b.ID, b.N, n)}
	}
	if !b.Last {
		return decision{outcome: OutcomeStaged, status: http.StatusOK,
			reason: "staged: stored with the rest of its ordering key once the batch's last chunk comes",
			header: http.Header{handoff.StagedHeader: {strconv.Itoa(len(ib.hooks))}}}
	}
	defer p.batches.drop(name, ib)
	return p.storeBatch(ctx, r, name, ib)
}

// storeBatch stores a batch's webhooks, in their order, each durable
// before the next is appended; the key is admitted as one, at its first
// webhook (the host's max_queued). If the spool refuses one, it stops
// there, and the answer says how many it stored: those the sender
// deletes, and it sends the rest as a new batch.
func (p *Proxy) storeBatch(ctx context.Context, r *http.Request, name string, ib *inBatch) decision {
	if r.Context().Err() != nil {
		return decision{outcome: outcomeError, status: http.StatusServiceUnavailable,
			reason: "hand-off batch: its sender went before it was stored: nothing of it is stored"}
	}
	first := ib.hooks[0].m
	var last decision
	for i, st := range ib.hooks {
		hp := st.hp
		if i > 0 {
			hp.MaxQueued = 0
		}
		d := p.appended(p.appendHanded(ctx, st.m, hp, st.keys))
		if d.status != http.StatusAccepted {
			p.log.Warn("hand-off batch cut short: the spool refused one of its webhooks; the sender keeps the rest",
				"host", first.Host, "ordering_key", first.Ordering, "stored", i, "of", len(ib.hooks), "reason", d.reason)
			d.reason = fmt.Sprintf("hand-off batch: stored %d of the %d of its ordering key, then: %s", i, len(ib.hooks), d.reason)
			h := http.Header{handoff.StoredHeader: {strconv.Itoa(i)}}
			for k, vs := range d.header {
				h[k] = vs
			}
			d.header = h
			return d
		}
		if i < len(ib.hooks)-1 {
			// The last is counted with its request's ingest line.
			p.opts.Metrics.Ingest(ctx, d.outcome)
			p.counts[d.outcome].Add(1)
		}
		last = d
	}
	p.batches.remember(name, last.id, len(ib.hooks))
	p.log.Info("hand-off batch stored", "host", first.Host, "fairness_key", first.Fairness, "ordering_key", first.Ordering,
		"webhooks", len(ib.hooks), "from", handoffFrom(name), "last_id", last.id)
	d := storedAnswer(last.id, len(ib.hooks))
	d.outcome = last.outcome
	return d
}

// storedAnswer is the 202 to a batch's last chunk: n stored, the last as
// id.
func storedAnswer(id string, n int) decision {
	return decision{outcome: outcomeAccepted, status: http.StatusAccepted, id: id,
		header: http.Header{handoff.StoredHeader: {strconv.Itoa(n)}}}
}

// appendHanded stores a hand-off's webhook; one whose claim checked and
// that has no idempotency key of the app's is keyed by its claim (see
// handoffWindow).
func (p *Proxy) appendHanded(ctx context.Context, m *spool.Message, hp HostPolicy, k spool.Keys) (decision, error) {
	if k.Idempotency == "" && m.OriginSpool != 0 {
		k.Idempotency = spool.Ref{Spool: m.OriginSpool, Seq: m.Origin}.String()
		k.Scope = handoffScope
		hp.DedupeWindow = max(hp.DedupeWindow, handoffWindow)
	}
	return p.appendKeys(ctx, m, hp, k)
}

// handoffFrom is the sender part of a batch's name.
func handoffFrom(name string) string { return handoff.From(name) }
