package replicate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/natstest"
	"github.com/hookpace/hookpace/spool"
)

var quiet = slog.New(slog.DiscardHandler)

// clock is a settable clock for the watch.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func connect(t *testing.T, urls []string, name string, tweak func(*Options)) *NATS {
	t.Helper()
	o := Options{URLs: urls, Replicas: 1, Replica: name, AdoptAfter: time.Hour, Timeout: 500 * time.Millisecond, Logger: quiet}
	if tweak != nil {
		tweak(&o)
	}
	r, err := Connect(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func openSpool(t *testing.T, dir string, r *NATS, name string) *spool.Spool {
	t.Helper()
	sp, err := spool.Open(spool.Options{Dir: dir, Logger: quiet, Replica: r, ReplicaName: name})
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

func msg(host string, i int) *spool.Message {
	return &spool.Message{Host: host, Method: "POST", URL: "http://" + host + "/hook",
		Header: http.Header{"X-Seq": {fmt.Sprint(i)}}, Body: fmt.Appendf(nil, `{"n":%d}`, i), Enqueued: time.Now()}
}

// records lists replica token's records in the stream: X-Hookpace-Id to
// body.
func records(t *testing.T, r *NATS, token string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := r.each(context.Background(), token, false, func(_ uint64, h map[string][]string, data []byte) error {
		m, err := spool.DecodeRecord(first(h[HeaderHost]), data)
		if err != nil {
			return err
		}
		out[first(h[HeaderID])] = string(m.Body)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// local lists a spool's queue: X-Hookpace-Id to body.
func local(t *testing.T, sp *spool.Spool) map[string]string {
	t.Helper()
	out := map[string]string{}
	for host := range sp.Hosts() {
		ms, err := sp.Queued(host, 100000)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			out[m.Ref().String()] = string(m.Body)
		}
	}
	return out
}

func equal(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d webhooks, want %d", what, len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s: webhook %s is %q, want %q", what, k, got[k], v)
		}
	}
}

func TestEveryQueuedWebhookHasACopyUntilItLeaves(t *testing.T) {
	c := natstest.Start(t, 1)
	r := connect(t, c.URLs(), "a", nil)
	defer r.Close()
	sp := openSpool(t, t.TempDir(), r, "a")
	defer sp.Close()
	ctx := context.Background()
	if err := r.Start(ctx, sp); err != nil {
		t.Fatal(err)
	}
	var ms []*spool.Message
	for i := range 90 {
		m := msg([]string{"a.example", "b.example:8443", "c.example"}[i%3], i)
		if err := sp.Append(ctx, m, 0); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	equal(t, "stream after appends", records(t, r, "a"), local(t, sp))
	for _, m := range ms[:30] {
		if err := sp.Delete(m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sp.BuryAll(ms[30:40], "test", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := sp.Drop(ms[40:45], "test"); err != nil {
		t.Fatal(err)
	}
	r.Settled()
	want := local(t, sp)
	if len(want) != 45 {
		t.Fatalf("local queue holds %d, want 45", len(want))
	}
	equal(t, "stream after deliveries, burials and drops", records(t, r, "a"), want)
	if s := r.Status(); !s.Reachable || s.Published != 90 || s.Removed != 45 || s.Epoch != 1 {
		t.Fatalf("status %+v", s)
	}
}

func TestUnavailableStreamRefusesOrSaysLocal(t *testing.T) {
	c := natstest.Start(t, 1)
	ctx := context.Background()
	refuse := connect(t, c.URLs(), "a", func(o *Options) { o.Timeout = 300 * time.Millisecond })
	defer refuse.Close()
	spA := openSpool(t, t.TempDir(), refuse, "a")
	defer spA.Close()
	keep := connect(t, c.URLs(), "b", func(o *Options) { o.Timeout = 300 * time.Millisecond; o.Local = true })
	defer keep.Close()
	spB := openSpool(t, t.TempDir(), keep, "b")
	defer spB.Close()
	for _, x := range []struct {
		r  *NATS
		sp *spool.Spool
	}{{refuse, spA}, {keep, spB}} {
		if err := x.r.Start(ctx, x.sp); err != nil {
			t.Fatal(err)
		}
	}
	c.Servers[0].Kill()

	err := spA.Append(ctx, msg("a.example", 1), 0)
	if !errors.Is(err, spool.ErrReplication) {
		t.Fatalf("append with the stream down (refuse): %v, want ErrReplication", err)
	}
	if n := len(local(t, spA)); n != 0 || spA.Usage().Messages != 0 {
		t.Fatalf("a refused webhook is queued: %d (usage %d)", n, spA.Usage().Messages)
	}
	if s := refuse.Status(); s.Reachable || s.FailedRounds == 0 {
		t.Fatalf("status with the stream down: %+v", s)
	}
	if err := spB.Append(ctx, msg("a.example", 2), 0); err != nil {
		t.Fatalf("append with the stream down (local): %v", err)
	}
	if s := keep.Status(); s.Reachable || s.LocalOnly != 1 {
		t.Fatalf("status in local mode with the stream down: %+v", s)
	}

	c.Servers[0].Restart()
	for deadline := time.Now().Add(time.Minute); !refuse.nc.IsConnected(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no reconnection within a minute")
		}
	}
	if err := spA.Append(ctx, msg("a.example", 3), 0); err != nil {
		t.Fatalf("append once the stream is back: %v", err)
	}
	refuse.Settled()
	equal(t, "stream after recovery", records(t, refuse, "a"), local(t, spA))
}

func TestAdoptedQueueIsDeliveredByTheAdopterAndDroppedByTheReturner(t *testing.T) {
	c := natstest.Start(t, 1)
	ctx := context.Background()
	clk := &clock{now: time.Now()}

	dirA := t.TempDir()
	ra := connect(t, c.URLs(), "a", nil)
	spA := openSpool(t, dirA, ra, "a")
	if err := ra.Start(ctx, spA); err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		m := msg(fmt.Sprintf("h%d.example", i%4), i)
		if i%4 == 0 {
			m.Ordering = "k"
		}
		if err := spA.Append(ctx, m, 0); err != nil {
			t.Fatal(err)
		}
	}
	accepted := local(t, spA)
	// a's node is gone: it sends no more heartbeats (its spool is kept
	// aside, to come back with later).
	spA.Close()
	ra.Close()

	rb, spB := startReplica(t, c, "b", t.TempDir(), clk)
	rb.lookForDead(ctx, spB) // sees a's heartbeat
	rb.adopting.Wait()
	if got := len(local(t, spB)); got != 0 {
		t.Fatalf("b adopted %d before a was silent for adopt_after", got)
	}
	clk.Add(time.Hour + time.Second)
	rb.lookForDead(ctx, spB)
	rb.adopting.Wait()
	rb.Settled()

	equal(t, "b's queue after adopting a's", local(t, spB), accepted)
	equal(t, "b's records in the stream", records(t, rb, "b"), accepted)
	if n := len(records(t, rb, "a")); n != 0 {
		t.Fatalf("a's records left in the stream: %d", n)
	}
	if s := rb.Status(); s.Adoptions != 1 || s.Adopted != 60 || len(s.Adopting) != 0 {
		t.Fatalf("b's status %+v", s)
	}
	// Ordering: a host's adopted webhooks keep their order.
	ms, err := spB.Queued("h0.example", 100)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(ms); i++ {
		if ms[i].Origin <= ms[i-1].Origin {
			t.Fatalf("h0's adopted webhooks out of order: %d after %d", ms[i].Origin, ms[i-1].Origin)
		}
	}
	e, err := rb.leases.Get(ctx, leaseKey("a"))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(e.Value()); got != `{"holder":"","epoch":2,"adopted_by":"b"}` {
		t.Fatalf("a's lease after the adoption: %s", got)
	}

	// a comes back on its old spool: everything there was adopted, and it
	// delivers none of it.
	ra2, spA2 := startReplica(t, c, "a", dirA, nil)
	if got := local(t, spA2); len(got) != 0 {
		t.Fatalf("a came back with %d webhooks b adopted", len(got))
	}
	if s := ra2.Status(); s.Dropped != 60 || s.Epoch != 3 || spA2.ReplicaEpoch() != 3 {
		t.Fatalf("a's status on return %+v (spool epoch %d)", s, spA2.ReplicaEpoch())
	}
}

func TestFreshSpoolTakesItsReplicasRecordsBack(t *testing.T) {
	c := natstest.Start(t, 1)
	ctx := context.Background()
	ra := connect(t, c.URLs(), "a", nil)
	spA := openSpool(t, t.TempDir(), ra, "a")
	if err := ra.Start(ctx, spA); err != nil {
		t.Fatal(err)
	}
	for i := range 25 {
		if err := spA.Append(ctx, msg("h.example", i), 0); err != nil {
			t.Fatal(err)
		}
	}
	accepted := local(t, spA)
	spA.Close()
	ra.Close()

	// The same replica on a new, empty spool (its disk was lost).
	ra2 := connect(t, c.URLs(), "a", nil)
	defer ra2.Close()
	spA2 := openSpool(t, t.TempDir(), ra2, "a")
	defer spA2.Close()
	if err := ra2.Start(ctx, spA2); err != nil {
		t.Fatal(err)
	}
	ra2.Settled()
	equal(t, "the new spool", local(t, spA2), accepted)
	equal(t, "the stream", records(t, ra2, "a"), accepted)
}

func TestSpoolRefusesAnotherReplicasName(t *testing.T) {
	dir := t.TempDir()
	sp, err := spool.Open(spool.Options{Dir: dir, Logger: quiet, ReplicaName: "a"})
	if err != nil {
		t.Fatal(err)
	}
	sp.Close()
	if _, err := spool.Open(spool.Options{Dir: dir, Logger: quiet, ReplicaName: "b"}); err == nil {
		t.Fatal("a spool of replica a opened as b")
	}
}

func TestLocalOnlyWebhooksAreCopiedAtTheNextStart(t *testing.T) {
	c := natstest.Start(t, 1)
	ctx := context.Background()
	dir := t.TempDir()
	localMode := func(o *Options) { o.Local = true; o.Timeout = 300 * time.Millisecond }
	r := connect(t, c.URLs(), "a", localMode)
	sp := openSpool(t, dir, r, "a")
	if err := r.Start(ctx, sp); err != nil {
		t.Fatal(err)
	}
	if err := sp.Append(ctx, msg("h.example", 0), 0); err != nil {
		t.Fatal(err)
	}
	c.Servers[0].Kill()
	for i := 1; i <= 3; i++ {
		if err := sp.Append(ctx, msg("h.example", i), 0); err != nil {
			t.Fatal(err)
		}
	}
	if s := r.Status(); s.LocalOnly != 3 {
		t.Fatalf("status with the stream down: %+v", s)
	}
	accepted := local(t, sp)
	sp.Close()
	r.Close()

	c.Servers[0].Restart()
	r2 := connect(t, c.URLs(), "a", localMode)
	defer r2.Close()
	sp2 := openSpool(t, dir, r2, "a")
	defer sp2.Close()
	if err := r2.Start(ctx, sp2); err != nil {
		t.Fatal(err)
	}
	equal(t, "the queue after the restart", local(t, sp2), accepted)
	equal(t, "the stream after the restart", records(t, r2, "a"), accepted)
}

func TestNoAdoptionForSilenceWhileTheStreamWasOutOfReach(t *testing.T) {
	c := natstest.Start(t, 1)
	ctx := context.Background()
	clk := &clock{now: time.Now()}
	ra := connect(t, c.URLs(), "a", nil)
	defer ra.Close()
	spA := openSpool(t, t.TempDir(), ra, "a")
	defer spA.Close()
	if err := ra.Start(ctx, spA); err != nil {
		t.Fatal(err)
	}
	if err := spA.Append(ctx, msg("h.example", 1), 0); err != nil {
		t.Fatal(err)
	}
	rb, spB := startReplica(t, c, "b", t.TempDir(), clk)
	rb.lookForDead(ctx, spB) // sees a's heartbeat
	// The stream was out of reach for an hour: nobody's heartbeat changed.
	clk.Add(time.Hour + time.Second)
	rb.regainedSight()
	rb.lookForDead(ctx, spB)
	rb.adopting.Wait()
	if s := rb.Status(); s.Adoptions != 0 || len(local(t, spB)) != 0 {
		t.Fatalf("b adopted a right after regaining sight of the stream: %+v", s)
	}
	// a stays silent for adopt_after from then on: it is adopted.
	clk.Add(time.Hour + time.Second)
	rb.lookForDead(ctx, spB)
	rb.adopting.Wait()
	if s := rb.Status(); s.Adoptions != 1 || len(local(t, spB)) != 1 {
		t.Fatalf("b did not adopt a, silent for adopt_after after sight came back: %+v", s)
	}
	// a was alive all along: it learns that its queue was adopted.
	if s := ra.Status(); s.LeaseLost {
		t.Fatalf("a's lease lost before it looked: %+v", s)
	}
	ra.checkOwn(ctx)
	if s := ra.Status(); !s.LeaseLost || len(s.Leases) != 0 {
		t.Fatalf("a's status once its lease was taken: %+v", s)
	}
}

func TestDeletesWaitOutAnOutage(t *testing.T) {
	c := natstest.Start(t, 1)
	ctx := context.Background()
	r := connect(t, c.URLs(), "a", func(o *Options) { o.Timeout = 300 * time.Millisecond })
	defer r.Close()
	sp := openSpool(t, t.TempDir(), r, "a")
	defer sp.Close()
	if err := r.Start(ctx, sp); err != nil {
		t.Fatal(err)
	}
	var ms []*spool.Message
	for i := range 5 {
		m := msg("h.example", i)
		if err := sp.Append(ctx, m, 0); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	c.Servers[0].Kill()
	for _, m := range ms[:3] { // delivered while the stream is down
		if err := sp.Delete(m); err != nil {
			t.Fatal(err)
		}
	}
	c.Servers[0].Restart()
	r.Settled()
	equal(t, "the stream once it is back", records(t, r, "a"), local(t, sp))
	if s := r.Status(); s.Removed != 3 || s.Lag != 0 {
		t.Fatalf("status %+v", s)
	}
}

// A round's publish runs alongside its local commit: a node that stops
// between the two (the publish in flight, or refused and not yet undone)
// leaves a webhook queued locally, with its idempotency key, that the
// stream never took and its client never had a 202 for. If the replica's
// queue is adopted meanwhile, the replica drops that webhook when it comes
// back, with what the adopter delivered; its key must go with it, or the
// client's retry is answered as a Duplicate of a webhook nobody delivers.
func TestReturnerForgetsTheKeysOfWhatItDrops(t *testing.T) {
	c := natstest.Start(t, 1)
	ctx := context.Background()
	clk := &clock{now: time.Now()}
	keys := spool.Keys{Idempotency: "order-17", Window: time.Hour}

	dirA := t.TempDir()
	ra := connect(t, c.URLs(), "a", nil)
	spA := openSpool(t, dirA, ra, "a")
	if err := ra.Start(ctx, spA); err != nil {
		t.Fatal(err)
	}
	if err := spA.Append(ctx, msg("a.example", 1), 0); err != nil {
		t.Fatal(err)
	}
	spA.Close()
	ra.Close()
	// What a stop between the local commit and the publish leaves on disk:
	// the webhook and its key, committed without a copy in the stream.
	sp, err := spool.Open(spool.Options{Dir: dirA, Logger: quiet, ReplicaName: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := sp.AppendKeys(ctx, msg("a.example", 2), 0, keys); err != nil || got != spool.Stored {
		t.Fatalf("the webhook of the round in flight: %v, %v", got, err)
	}
	sp.Close()

	rb, spB := startReplica(t, c, "b", t.TempDir(), clk)
	rb.lookForDead(ctx, spB)
	clk.Add(time.Hour + time.Second)
	rb.lookForDead(ctx, spB)
	rb.adopting.Wait()
	if got := len(local(t, spB)); got != 1 {
		t.Fatalf("b adopted %d webhooks, want the 1 in the stream", got)
	}

	_, spA2 := startReplica(t, c, "a", dirA, nil)
	if got := local(t, spA2); len(got) != 0 {
		t.Fatalf("a came back with %d webhooks queued, want none", len(got))
	}
	// The client had no 202 for the dropped webhook, and retries.
	retry := msg("a.example", 2)
	got, err := spA2.AppendKeys(ctx, retry, 0, keys)
	if err != nil || got != spool.Stored {
		t.Fatalf("the retry of the dropped webhook: %v, %v; want Stored (a Duplicate of id %d is delivered by no one)", got, err, retry.ID)
	}
	if n := len(local(t, spA2)); n != 1 {
		t.Fatalf("a's queue after the retry: %d, want 1", n)
	}
}

// startReplica connects replica name (on clk's time, when given) and
// starts it on a spool in dir; both close when the test ends.
func startReplica(t *testing.T, c *natstest.Cluster, name, dir string, clk *clock) (*NATS, *spool.Spool) {
	t.Helper()
	var opt func(*Options)
	if clk != nil {
		opt = func(o *Options) { o.Now = clk.Now }
	}
	r := connect(t, c.URLs(), name, opt)
	t.Cleanup(func() { r.Close() })
	sp := openSpool(t, dir, r, name)
	t.Cleanup(func() { sp.Close() })
	if err := r.Start(context.Background(), sp); err != nil {
		t.Fatal(err)
	}
	return r, sp
}
