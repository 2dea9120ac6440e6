package replicate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	"github.com/hookpace/hookpace/spool"
	"github.com/nats-io/nats.go/jetstream"
)

// Queue is what replication needs of the local spool (*spool.Spool): to
// take adopted webhooks in, to reconcile its queue with the stream at the
// start, and to record the lease epoch it holds.
type Queue interface {
	Append(ctx context.Context, m *spool.Message, hostLimit int64) error
	Hosts() map[string]spool.HostUsage
	ReadHost(host string, after spool.HostCursor, max int) ([]*spool.Message, spool.HostCursor, error)
	Drop(ms []*spool.Message, by string) (int, error)
	ForgetKeys(ms []*spool.Message) (int, error)
	Key(m *spool.Message) string
	Replicated(m *spool.Message) spool.Replicated
	ReplicaEpoch() uint64
	SetReplicaEpoch(epoch uint64) error
}

// lease is the value of lease.<replica> in the leases bucket: who holds
// the replica's queue, at which epoch. Every change is a compare-and-set
// on the key's revision and raises the epoch; Holder "" is a queue that
// an adopter has emptied and let go.
type lease struct {
	Holder    string `json:"holder"`
	Epoch     uint64 `json:"epoch"`
	AdoptedBy string `json:"adopted_by,omitempty"`
}

func leaseKey(token string) string { return "lease." + token }
func beatKey(token string) string  { return "hb." + token }

// leaseState is what the watch knows; guarded by its mu.
type leaseState struct {
	mu        sync.Mutex
	epoch     uint64
	held      []string // replicas whose lease this one holds, adoptions in progress
	adoptions int64
	adopted   int64
	dropped   int64
	lost      bool // another replica took this one's lease while it ran
	// seen is, per other replica, its heartbeat's last revision and when
	// this replica saw it change (by its own clock: replicas' clocks never
	// meet).
	seen map[string]beatSeen
}

type beatSeen struct {
	rev uint64
	at  time.Time
}

func (l *leaseState) status(s *Status) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s.Epoch = l.epoch
	s.Leases = append([]string{s.Replica}, l.held...)
	s.Adopting = slices.Clone(l.held)
	s.Adoptions, s.Adopted, s.Dropped = l.adoptions, l.adopted, l.dropped
	s.LeaseLost = l.lost
	if l.lost {
		s.Leases = slices.Clone(l.held)
	}
}

// Start takes this replica's lease and reconciles the local queue with the
// stream, then starts the heartbeat, the watch for dead replicas and the
// deleters. It returns once the local queue may be delivered from: call it
// before the dispatcher starts. If another replica is adopting this one's
// queue, Start waits for it to finish.
func (r *NATS) Start(ctx context.Context, q Queue) error {
	r.lease.seen = map[string]beatSeen{}
	for range deleters {
		r.wg.Add(1)
		go r.deleteLoop()
	}
	var epoch uint64
	var authoritative bool
	// Leaders being elected (a cluster just started, or a server lost)
	// fail requests for a few seconds: the start is tried again for up to
	// 30 s.
	err := r.retry(ctx, func() error {
		if err := r.beat(ctx); err != nil {
			return fmt.Errorf("replication heartbeat: %w", err)
		}
		var err error
		epoch, authoritative, err = r.takeOwn(ctx, q)
		return err
	})
	if err != nil {
		return err
	}
	if err := r.retry(ctx, func() error { return r.reconcile(ctx, q, authoritative) }); err != nil {
		return err
	}
	if err := q.SetReplicaEpoch(epoch); err != nil {
		return err
	}
	r.lease.mu.Lock()
	r.lease.epoch = epoch
	r.lease.mu.Unlock()
	r.log.Info("replication started", "stream", r.opts.Stream, "replica", r.opts.Replica, "epoch", epoch,
		"replicas", r.opts.Replicas, "adopt_after", r.opts.AdoptAfter)
	r.wg.Add(1)
	go r.watch(q)
	return nil
}

// retry calls fn until it succeeds, for up to max(30 s, 4 × Timeout).
func (r *NATS) retry(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(max(30*time.Second, 4*r.opts.Timeout))
	for {
		err := fn()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		r.log.Warn("replication: the stream is not ready yet; trying again", "error", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// takeOwn takes this replica's own lease, raising its epoch. The stream is
// authoritative (what the local queue holds and the stream does not was
// delivered by another replica) unless the spool recorded the epoch the
// lease had: a restart of the replica that held it last, on its own spool.
func (r *NATS) takeOwn(ctx context.Context, q Queue) (epoch uint64, authoritative bool, err error) {
	key := leaseKey(r.token)
	waiting := false
	for {
		e, err := r.leases.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			if _, err := r.leases.Create(ctx, key, encode(lease{Holder: r.token, Epoch: 1})); err != nil {
				if errors.Is(err, jetstream.ErrKeyExists) {
					continue
				}
				return 0, false, fmt.Errorf("take the replica's lease: %w", err)
			}
			return 1, q.ReplicaEpoch() != 0, nil
		}
		if err != nil {
			return 0, false, fmt.Errorf("read the replica's lease: %w", err)
		}
		var l lease
		if err := json.Unmarshal(e.Value(), &l); err != nil {
			return 0, false, fmt.Errorf("replica's lease %q is corrupt: %w", key, err)
		}
		if l.Holder == r.token || l.Holder == "" || !r.alive(ctx, l.Holder) {
			next := lease{Holder: r.token, Epoch: l.Epoch + 1}
			if _, err := r.leases.Update(ctx, key, encode(next), e.Revision()); err != nil {
				continue // changed meanwhile: read it again
			}
			if l.Holder != r.token {
				r.log.Warn("replication: another replica adopted this one's queue; the local queue keeps only what the stream still holds",
					"adopted_by", firstOf(l.AdoptedBy, l.Holder), "epoch", next.Epoch)
			}
			return next.Epoch, l.Holder != r.token || q.ReplicaEpoch() != l.Epoch, nil
		}
		if !waiting {
			waiting = true
			r.log.Warn("replication: replica "+l.Holder+" is adopting this replica's queue; waiting for it to finish before delivering",
				"epoch", l.Epoch)
		}
		select {
		case <-ctx.Done():
			return 0, false, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func encode(l lease) []byte {
	b, _ := json.Marshal(l)
	return b
}

// alive reports whether replica token's heartbeat is younger than
// AdoptAfter, by the stream's timestamp of it.
func (r *NATS) alive(ctx context.Context, token string) bool {
	e, err := r.beats.Get(ctx, beatKey(token))
	if err != nil {
		return !errors.Is(err, jetstream.ErrKeyNotFound) // unknown: assume alive
	}
	return r.opts.Now().Sub(e.Created()) < r.opts.AdoptAfter
}

// beat writes this replica's heartbeat.
func (r *NATS) beat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	_, err := r.beats.Put(ctx, beatKey(r.token), []byte(r.opts.Now().UTC().Format(time.RFC3339Nano)))
	return err
}

// entry is one record of the stream, as a scan saw it.
type entry struct {
	seq  uint64
	key  string
	host string
}

// scan lists the records of replica token, headers only, in stream order.
func (r *NATS) scan(ctx context.Context, token string) ([]entry, error) {
	var out []entry
	err := r.each(ctx, token, true, func(seq uint64, h map[string][]string, _ []byte) error {
		out = append(out, entry{seq: seq, key: first(h[HeaderKey]), host: first(h[HeaderHost])})
		return nil
	})
	return out, err
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// each calls fn for every record of replica token that the stream holds
// now, in stream order.
func (r *NATS) each(ctx context.Context, token string, headersOnly bool,
	fn func(seq uint64, h map[string][]string, data []byte) error) error {
	filter := r.filter(token)
	info, err := r.stream.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return fmt.Errorf("read stream %q: %w", r.opts.Stream, err)
	}
	var total uint64
	for _, n := range info.State.Subjects {
		total += n
	}
	if total == 0 {
		return nil
	}
	c, err := r.js.OrderedConsumer(ctx, r.opts.Stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter},
		HeadersOnly: headersOnly})
	if err != nil {
		return fmt.Errorf("read stream %q: %w", r.opts.Stream, err)
	}
	for {
		batch, err := c.Fetch(512, jetstream.FetchMaxWait(r.opts.Timeout))
		if err != nil {
			return fmt.Errorf("read stream %q: %w", r.opts.Stream, err)
		}
		n, last := 0, false
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				return err
			}
			if err := fn(md.Sequence.Stream, m.Headers(), m.Data()); err != nil {
				return err
			}
			last = md.NumPending == 0
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return fmt.Errorf("read stream %q: %w", r.opts.Stream, err)
		}
		if last || n == 0 {
			return nil
		}
	}
}

// reconcile matches the local queue with this replica's records in the
// stream. A local webhook with a copy keeps it (its sequence is learned,
// for the delete after delivery). One without: when the stream is
// authoritative, another replica delivered it, and it is dropped; else it
// was acknowledged on the local spool alone, and is copied now. A copy without a local
// webhook (a spool lost or restored from an older copy) is taken in, as
// an adoption would.
func (r *NATS) reconcile(ctx context.Context, q Queue, authoritative bool) error {
	entries, err := r.scan(ctx, r.token)
	if err != nil {
		return err
	}
	byKey := make(map[string]uint64, len(entries))
	for _, e := range entries {
		byKey[e.key] = e.seq
	}
	matched := make(map[uint64]bool, len(entries))
	var drop []*spool.Message
	var republish []spool.Replicated
	local, unreplicated := 0, 0
	for host := range q.Hosts() {
		var cur spool.HostCursor
		for {
			ms, next, err := q.ReadHost(host, cur, 512)
			if err != nil {
				return fmt.Errorf("reconcile the local queue: %w", err)
			}
			for _, m := range ms {
				local++
				k := q.Key(m)
				if seq, ok := byKey[k]; ok {
					matched[seq] = true
					r.mu.Lock()
					r.seqs[k] = seq
					r.mu.Unlock()
				} else if authoritative {
					drop = append(drop, m)
				} else {
					unreplicated++
					republish = append(republish, q.Replicated(m))
					if len(republish) == 256 {
						r.republish(republish)
						republish = republish[:0]
					}
				}
			}
			if len(ms) < 512 {
				break
			}
			cur = next
		}
	}
	r.republish(republish)
	if len(drop) > 0 {
		// A dropped webhook may be of a round whose publish was in flight
		// when this node stopped: never in the stream, never acknowledged.
		// Its idempotency key goes first, so that the client's retry is
		// stored anew, not answered with the id of a webhook no one
		// delivers; a stop before the drop drops it at the next start.
		if _, err := q.ForgetKeys(drop); err != nil {
			return fmt.Errorf("reconcile the local queue: %w", err)
		}
		n, err := q.Drop(drop, "replication: delivered by the replica that adopted this one's queue")
		if err != nil {
			return fmt.Errorf("reconcile the local queue: %w", err)
		}
		r.lease.mu.Lock()
		r.lease.dropped += int64(n)
		r.lease.mu.Unlock()
	}
	var missing []entry
	for _, e := range entries {
		if !matched[e.seq] {
			missing = append(missing, e)
		}
	}
	r.log.Info("replication: local queue reconciled with the stream", "local", local, "in_stream", len(entries),
		"dropped", len(drop), "local_only", unreplicated, "taken_from_stream", len(missing))
	if len(missing) == 0 {
		return nil
	}
	want := make(map[uint64]bool, len(missing))
	for _, e := range missing {
		want[e.seq] = true
	}
	_, err = r.take(ctx, q, r.token, want)
	return err
}

// republish copies webhooks that a run acknowledged on the local spool
// alone (on_unavailable: local) to the stream, now that it can take them;
// if it cannot, they stay local, as they were.
func (r *NATS) republish(recs []spool.Replicated) {
	if len(recs) == 0 {
		return
	}
	if err := r.publish(recs); err != nil {
		r.localOnly.Add(int64(len(recs))) // still on this node alone
		r.log.Warn("replication: webhooks acknowledged on the local spool alone could not be copied to the stream",
			"webhooks", len(recs), "error", err)
		return
	}
	r.log.Info("replication: webhooks acknowledged on the local spool alone copied to the stream", "webhooks", len(recs))
}

// take appends replica token's records (those in want, or all when want is
// nil) to the local queue, keeping each webhook's X-Hookpace-Id, and
// deletes each from the stream once its local copy (and that copy's own
// replica) is durable. A host's records are taken in stream order, one at
// a time, so that ordering keys keep their order; hosts go in parallel.
func (r *NATS) take(ctx context.Context, q Queue, token string, want map[uint64]bool) (int64, error) {
	const workers = 32
	type item struct {
		seq uint64
		m   *spool.Message
	}
	var chans [workers]chan item
	var wg sync.WaitGroup
	var mu sync.Mutex
	var taken int64
	var firstErr error
	for i := range chans {
		chans[i] = make(chan item, 64)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range chans[i] {
				if err := r.appendAdopted(ctx, q, it.m); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				r.mu.Lock()
				r.dels = append(r.dels, it.seq)
				r.delCond.Signal()
				r.mu.Unlock()
				mu.Lock()
				taken++
				mu.Unlock()
			}
		}()
	}
	err := r.each(ctx, token, false, func(seq uint64, h map[string][]string, data []byte) error {
		if want != nil && !want[seq] {
			return nil
		}
		host := first(h[HeaderHost])
		m, err := spool.DecodeRecord(host, data)
		if err != nil {
			r.log.Error("replication: a record in the stream cannot be read; left there", "seq", seq, "error", err)
			return nil
		}
		if ref, err := spool.ParseRef(first(h[HeaderID])); err == nil && ref.Spool != 0 {
			m.Origin, m.OriginSpool = ref.Seq, ref.Spool
		}
		f := fnv.New32a()
		f.Write([]byte(host))
		select {
		case chans[f.Sum32()%workers] <- item{seq: seq, m: m}:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	})
	for _, c := range chans {
		close(c)
	}
	wg.Wait()
	if err == nil {
		err = firstErr
	}
	return taken, err
}

// appendAdopted appends m, waiting out a full spool (it is not refused:
// it was acknowledged already).
func (r *NATS) appendAdopted(ctx context.Context, q Queue, m *spool.Message) error {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		err := q.Append(ctx, m, 0)
		var full *spool.FullError
		if err == nil || !errors.As(err, &full) && !errors.Is(err, spool.ErrReplication) && !isWriteErr(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.stop:
			return errors.New("stopping")
		case <-time.After(wait):
		}
	}
}

func isWriteErr(err error) bool {
	var w *spool.WriteError
	return errors.As(err, &w) && !errors.Is(err, spool.ErrTooLarge)
}

// watch heartbeats, and adopts the queue of any replica whose heartbeat
// has not changed for AdoptAfter.
func (r *NATS) watch(q Queue) {
	defer r.wg.Done()
	every := max(r.opts.AdoptAfter/4, 100*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-r.stop; cancel() }()
	blind := false
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		if err := r.beat(ctx); err != nil {
			if !blind {
				r.log.Warn("replication: heartbeat failed; no adoption until it succeeds again", "error", err)
			}
			blind = true
			continue
		}
		if blind {
			blind = false
			r.regainedSight()
		}
		r.checkOwn(ctx)
		r.lookForDead(ctx, q)
	}
}

// checkOwn looks at this replica's own lease: another replica takes it
// only when this one was silent for adopt_after (cut off from the stream,
// or stopped). Its local queue then holds webhooks the adopter delivers
// too: the replica says so, loudly, once; its next start drops them.
func (r *NATS) checkOwn(ctx context.Context) {
	e, err := r.leases.Get(ctx, leaseKey(r.token))
	if err != nil {
		return
	}
	var l lease
	if json.Unmarshal(e.Value(), &l) != nil {
		return
	}
	r.lease.mu.Lock()
	lost := (l.Holder != r.token || l.Epoch != r.lease.epoch) && !r.lease.lost
	if lost {
		r.lease.lost = true
	}
	r.lease.mu.Unlock()
	if lost {
		by := firstOf(l.AdoptedBy, l.Holder)
		r.log.Error("replication: another replica adopted this one's queue while it ran (it was cut off from the stream "+
			"for adopt_after); webhooks queued here may be delivered twice; restart hookpace to drop what was adopted",
			"adopted_by", by, "epoch", l.Epoch)
		r.opts.Emit("replica.lease_lost", map[string]any{"replica": r.token, "adopted_by": by, "epoch": l.Epoch})
	}
}

// regainedSight restarts the count of every other replica's silence:
// while this replica could not write its own heartbeat, it could not see
// theirs change either (the stream was out of reach, for them too,
// perhaps), and their silence meanwhile says nothing of them.
func (r *NATS) regainedSight() {
	now := r.opts.Now()
	r.lease.mu.Lock()
	defer r.lease.mu.Unlock()
	for k, s := range r.lease.seen {
		s.at = now
		r.lease.seen[k] = s
	}
}

// lookForDead adopts the queue of each replica silent for AdoptAfter whose
// lease is still its own (or let go with records left, or held by a
// replica that is silent too).
func (r *NATS) lookForDead(ctx context.Context, q Queue) {
	kctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	keys, err := r.leases.Keys(kctx)
	cancel()
	if err != nil {
		return
	}
	now := r.opts.Now()
	for _, k := range keys {
		token, ok := cutPrefix(k, "lease.")
		if !ok || token == r.token {
			continue
		}
		var rev uint64
		if e, err := r.beats.Get(ctx, beatKey(token)); err == nil {
			rev = e.Revision()
		} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		r.lease.mu.Lock()
		s, ok := r.lease.seen[token]
		if !ok || s.rev != rev {
			s = beatSeen{rev: rev, at: now}
			r.lease.seen[token] = s
		}
		busy := slices.Contains(r.lease.held, token)
		r.lease.mu.Unlock()
		if busy || now.Sub(s.at) < r.opts.AdoptAfter {
			continue
		}
		e, err := r.leases.Get(ctx, k)
		if err != nil {
			continue
		}
		var l lease
		if json.Unmarshal(e.Value(), &l) != nil {
			continue
		}
		switch {
		case l.Holder == token:
		case l.Holder == r.token:
			// Held by this replica already: a run before this one died
			// while adopting. Take it again.
		case l.Holder == "":
			if n, err := r.count(ctx, token); err != nil || n == 0 {
				continue
			}
		case r.alive(ctx, l.Holder):
			continue
		}
		next := lease{Holder: r.token, Epoch: l.Epoch + 1}
		rev2, err := r.leases.Update(ctx, k, encode(next), e.Revision())
		if err != nil {
			continue // another replica took it first
		}
		r.lease.mu.Lock()
		r.lease.held = append(r.lease.held, token)
		r.lease.mu.Unlock()
		r.adopting.Add(1)
		go r.adopt(ctx, q, token, next, rev2, now.Sub(s.at))
	}
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) < len(p) || s[:len(p)] != p {
		return s, false
	}
	return s[len(p):], true
}

// count is how many records replica token has in the stream.
func (r *NATS) count(ctx context.Context, token string) (uint64, error) {
	info, err := r.stream.Info(ctx, jetstream.WithSubjectFilter(r.filter(token)))
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n, nil
}

// adopt takes dead replica token's queue into the local one, then lets
// its lease go (Holder ""), so that the replica may come back.
func (r *NATS) adopt(ctx context.Context, q Queue, token string, l lease, rev uint64, silent time.Duration) {
	defer r.adopting.Done()
	start := time.Now()
	r.log.Warn("replication: adopting the queue of a silent replica", "replica", token, "silent_for", silent.Round(time.Second),
		"epoch", l.Epoch)
	n, err := r.take(ctx, q, token, nil)
	r.lease.mu.Lock()
	r.lease.held = slices.DeleteFunc(r.lease.held, func(s string) bool { return s == token })
	r.lease.adopted += n
	if err == nil {
		r.lease.adoptions++
	}
	r.lease.mu.Unlock()
	if err != nil {
		r.log.Error("replication: adoption stopped; what is left stays in the stream for the next try", "replica", token,
			"taken", n, "error", err)
		return
	}
	uctx, cancel := context.WithTimeout(context.Background(), r.opts.Timeout)
	defer cancel()
	if _, err := r.leases.Update(uctx, leaseKey(token), encode(lease{Epoch: l.Epoch, AdoptedBy: r.token}), rev); err != nil {
		r.log.Warn("replication: letting an adopted replica's lease go failed", "replica", token, "error", err)
	}
	r.log.Warn("replication: adopted a replica's queue", "replica", token, "webhooks", n, "took", time.Since(start).Round(time.Millisecond))
	r.opts.Emit("replica.adopted", map[string]any{"replica": token, "webhooks": n, "epoch": l.Epoch,
		"took_ms": time.Since(start).Milliseconds()})
}
