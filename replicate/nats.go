// Package replicate keeps a copy of hookpace's queue off the node, in a
// NATS JetStream stream (a Raft group of Replicas servers), so that a
// webhook acknowledged by a replica whose node is lost is still delivered:
// by a live replica that adopts the lost one's queue (lease.go).
//
// The spool calls NATS through spool.Replica inside each group commit:
// every record a round adds is published to the stream (asynchronously,
// all at once, with one wait) before the round's 202s are sent, and every
// record that leaves the queue is deleted from the stream in the round
// that removes it locally.
//
// Stream layout: subject <stream>.<replica>.<host token>; the payload is
// the spool's record; headers Hookpace-Key (the record's identity on the
// spool that published it, also its Nats-Msg-Id), Hookpace-Id (the
// webhook's X-Hookpace-Id) and Hookpace-Host. Leases and heartbeats are
// in two key-value buckets, <stream>_leases and <stream>_heartbeats.
package replicate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookpace/hookpace/spool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Headers of a replicated record.
const (
	HeaderKey  = "Hookpace-Key"
	HeaderID   = "Hookpace-Id"
	HeaderHost = "Hookpace-Host"
)

// Options configures the replication. Zero values take the defaults noted.
type Options struct {
	URLs     []string
	Replicas int    // default 3
	Stream   string // default "hookpace"
	Replica  string // this replica's name: a subject token (see Token); required
	// Credentials: at most one of CredsFile, NKeyFile, User (+Password).
	CredsFile string
	NKeyFile  string
	User      string
	Password  string
	TLS       *tls.Config // nil: plain, unless a URL says tls://
	// Local acknowledges on the local spool alone when the stream cannot
	// take a write (on_unavailable: local); false refuses the webhooks.
	Local      bool
	AdoptAfter time.Duration // default 30s
	Timeout    time.Duration // per publish round and request; default 2s
	Logger     *slog.Logger
	// Emit reports events (replica.adopted, replication.unavailable,
	// replication.available); nil: none.
	Emit func(typ string, data map[string]any)
	// Ordered connects to URLs in their order (the embedded server
	// first) rather than in a random one.
	Ordered bool
	// Now is the clock heartbeats are judged by (default time.Now).
	Now func() time.Time
}

func (o *Options) setDefaults() {
	if o.Replicas <= 0 {
		o.Replicas = 3
	}
	if o.Stream == "" {
		o.Stream = "hookpace"
	}
	if o.AdoptAfter <= 0 {
		o.AdoptAfter = 30 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Emit == nil {
		o.Emit = func(string, map[string]any) {}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// TLSConfig builds the client TLS configuration from files: caFile ("" =
// the system's roots) and a client certificate (both "" = none).
func TLSConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("spool.replicate.nats.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("spool.replicate.nats.ca_file: no certificate in %s", caFile)
		}
		c.RootCAs = pool
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("spool.replicate.nats.cert_file: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// NATS replicates a spool to a JetStream stream. Create it with Connect,
// open the spool with it as spool.Options.Replica, then Start it.
type NATS struct {
	opts   Options
	log    *slog.Logger
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	leases jetstream.KeyValue
	beats  jetstream.KeyValue
	token  string // this replica's subject token

	mu   sync.Mutex
	seqs map[string]uint64 // the stream sequence of each record of this spool, by key
	// dels are stream sequences waiting to be deleted; delCond wakes the
	// deleters.
	dels     []uint64
	deleting int  // deletes in flight
	abandon  bool // closing, and a delete failed: the rest are not sent
	delCond  *sync.Cond
	closed   bool

	down      atomic.Bool  // the last publish round failed
	published atomic.Int64 // records stored in the stream
	removed   atomic.Int64 // records deleted from it
	localOnly atomic.Int64 // webhooks acknowledged on the local spool alone
	failures  atomic.Int64 // publish rounds that failed
	delFailed atomic.Int64 // delete requests that failed

	lease leaseState // lease.go

	stop     chan struct{}
	wg       sync.WaitGroup // the watch and the deleters
	adopting sync.WaitGroup // adoptions in progress
}

// Connect connects to the cluster and makes sure the stream and the
// buckets exist (created with Replicas replicas if they do not). It fails
// when the cluster cannot be reached: a replica that cannot replicate
// does not start.
func Connect(ctx context.Context, opts Options) (*NATS, error) {
	opts.setDefaults()
	token := Token(opts.Replica)
	if token == "" {
		return nil, errors.New("replication needs this replica's name (fleet.replica)")
	}
	nopts := []nats.Option{nats.Name("hookpace " + opts.Replica), nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond), nats.Timeout(opts.Timeout),
		// While disconnected, a publish fails at once rather than waiting
		// in a buffer to be sent after its webhook was refused.
		nats.ReconnectBufSize(-1)}
	switch {
	case opts.CredsFile != "":
		nopts = append(nopts, nats.UserCredentials(opts.CredsFile))
	case opts.NKeyFile != "":
		o, err := nats.NkeyOptionFromSeed(opts.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("spool.replicate.nats.nkey_file: %w", err)
		}
		nopts = append(nopts, o)
	case opts.User != "":
		nopts = append(nopts, nats.UserInfo(opts.User, opts.Password))
	}
	if opts.TLS != nil {
		nopts = append(nopts, nats.Secure(opts.TLS))
	}
	if opts.Ordered {
		nopts = append(nopts, nats.DontRandomize())
	}
	nc, err := nats.Connect(strings.Join(opts.URLs, ","), nopts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS (spool.replicate.nats.urls): %w", err)
	}
	r := &NATS{opts: opts, log: opts.Logger, nc: nc, token: token, seqs: map[string]uint64{}, stop: make(chan struct{})}
	r.delCond = sync.NewCond(&r.mu)
	// A cluster that has just started (or lost a server) may take a while
	// to elect its leaders: the setup is tried again for up to 30 s.
	deadline := time.Now().Add(max(30*time.Second, 4*opts.Timeout))
	for {
		err := r.setup(ctx)
		if err == nil {
			return r, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			nc.Close()
			return nil, err
		}
		r.log.Warn("replication: the stream is not ready yet; trying again", "error", err)
		time.Sleep(time.Second)
	}
}

// setup opens (or creates) the stream and the buckets.
func (r *NATS) setup(ctx context.Context) error {
	// An acknowledgement that never comes fails its publish after a while,
	// so that lost ones do not fill the window of pending publishes.
	js, err := jetstream.New(r.nc, jetstream.WithPublishAsyncMaxPending(4096),
		jetstream.WithPublishAsyncTimeout(max(10*time.Second, 2*r.opts.Timeout)))
	if err != nil {
		return err
	}
	r.js = js
	ctx, cancel := context.WithTimeout(ctx, 4*r.opts.Timeout)
	defer cancel()
	name := r.opts.Stream
	r.stream, err = js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		r.stream, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"},
			Storage: jetstream.FileStorage, Replicas: r.opts.Replicas, Duplicates: 2 * time.Minute,
			Description: "hookpace's replicated queue"})
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			r.stream, err = js.Stream(ctx, name)
		}
	}
	if err != nil {
		return fmt.Errorf("open stream %q: %w", name, err)
	}
	if r.leases, err = r.bucket(ctx, name+"_leases", 0); err != nil {
		return err
	}
	if r.beats, err = r.bucket(ctx, name+"_heartbeats", 10*time.Minute); err != nil {
		return err
	}
	return nil
}

// bucket opens the key-value bucket name, creating it if there is none.
func (r *NATS) bucket(ctx context.Context, name string, ttl time.Duration) (jetstream.KeyValue, error) {
	kv, err := r.js.KeyValue(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = r.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name, TTL: ttl, Replicas: r.opts.Replicas,
			Storage: jetstream.FileStorage})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = r.js.KeyValue(ctx, name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open key-value bucket %q: %w", name, err)
	}
	return kv, nil
}

// Token is name as a subject token and key: characters NATS does not
// allow in one ('.', '*', '>', spaces and the like) become '_'.
func Token(name string) string {
	return strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			return c
		}
		return '_'
	}, name)
}

// subject is where replica token's records for host go.
func (r *NATS) subject(token, host string) string {
	return r.opts.Stream + "." + token + "." + Token(host)
}

// filter matches every record of replica token.
func (r *NATS) filter(token string) string { return r.opts.Stream + "." + token + ".>" }

// Publish stores a round's records in the stream: all are sent at once,
// then their acknowledgements are awaited together. A round the stream
// does not take (a server lost, a leader being elected) is sent again
// until Timeout has passed since the first try; records keep their
// Nats-Msg-Id, so a resend stores nothing twice. It implements
// spool.Replica.
func (r *NATS) Publish(recs []spool.Replicated) error {
	if err := r.publish(recs); err != nil {
		return r.unavailable(err, len(recs))
	}
	return nil
}

// publish stores recs, sending them again until Timeout (see Publish).
func (r *NATS) publish(recs []spool.Replicated) error {
	deadline := time.Now().Add(r.opts.Timeout)
	var failed [][]jetstream.PubAckFuture // tries whose copies may land late
	for {
		acked, futs, err := r.publishOnce(recs, deadline)
		if err == nil {
			r.took(recs, acked)
			return nil
		}
		failed = append(failed, futs)
		wait := time.Until(deadline)
		if wait <= 0 {
			if !r.opts.Local {
				go r.unpublish(failed)
			}
			return err
		}
		select {
		case <-time.After(min(wait, 100*time.Millisecond)):
		case <-r.stop:
			return err
		}
	}
}

// publishOnce sends recs and waits for their acknowledgements until
// deadline; it returns each record's stream sequence.
func (r *NATS) publishOnce(recs []spool.Replicated, deadline time.Time) ([]uint64, []jetstream.PubAckFuture, error) {
	futs := make([]jetstream.PubAckFuture, 0, len(recs))
	for _, rec := range recs {
		msg := nats.NewMsg(r.subject(r.token, rec.Host))
		msg.Data = rec.Record
		msg.Header.Set(HeaderKey, rec.Key)
		msg.Header.Set(HeaderID, rec.Ref)
		msg.Header.Set(HeaderHost, rec.Host)
		popts := []jetstream.PublishOpt{jetstream.WithExpectStream(r.opts.Stream)}
		if !rec.Replaces {
			popts = append(popts, jetstream.WithMsgID(rec.Key))
		}
		f, err := r.js.PublishMsgAsync(msg, popts...)
		if err != nil {
			return nil, futs, err
		}
		futs = append(futs, f)
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	acked := make([]uint64, len(futs))
	for i, f := range futs {
		select {
		case ack := <-f.Ok():
			acked[i] = ack.Sequence
		case err := <-f.Err():
			return nil, futs, err
		case <-timer.C:
			return nil, futs, errors.New("no acknowledgement from the stream in time")
		}
	}
	return acked, nil, nil
}

// took records where a stored round's records are.
func (r *NATS) took(recs []spool.Replicated, acked []uint64) {
	r.mu.Lock()
	for i, rec := range recs {
		if old, ok := r.seqs[rec.Key]; ok && old != acked[i] {
			r.dels = append(r.dels, old) // the copy a coalesced record replaced
			r.delCond.Signal()
		}
		r.seqs[rec.Key] = acked[i]
	}
	r.mu.Unlock()
	r.published.Add(int64(len(recs)))
	if r.down.CompareAndSwap(true, false) {
		r.log.Info("replication: the stream takes writes again", "stream", r.opts.Stream)
		r.opts.Emit("replication.available", map[string]any{"stream": r.opts.Stream})
	}
}

// unpublish deletes the copies of a refused round that the stream stores
// after all (their acknowledgement came late): the webhooks were refused,
// and must not be delivered by an adopter.
func (r *NATS) unpublish(tries [][]jetstream.PubAckFuture) {
	late := time.NewTimer(time.Minute)
	defer late.Stop()
	for _, futs := range tries {
		for _, f := range futs {
			select {
			case ack := <-f.Ok():
				r.mu.Lock()
				r.dels = append(r.dels, ack.Sequence)
				r.delCond.Signal()
				r.mu.Unlock()
			case <-f.Err():
			case <-late.C:
				return
			case <-r.stop:
				return
			}
		}
	}
}

// unavailable records a failed round of n records: in local mode they are
// acknowledged anyway, on the local spool alone, and said so loudly.
func (r *NATS) unavailable(err error, n int) error {
	r.failures.Add(1)
	if r.down.CompareAndSwap(false, true) {
		mode := "refused (on_unavailable: refuse)"
		if r.opts.Local {
			mode = "acknowledged on the local spool alone (on_unavailable: local)"
		}
		r.log.Error("replication: the stream cannot take writes; webhooks are "+mode, "stream", r.opts.Stream, "error", err)
		r.opts.Emit("replication.unavailable", map[string]any{"stream": r.opts.Stream, "error": err.Error(), "local": r.opts.Local})
	}
	if r.opts.Local {
		r.localOnly.Add(int64(n))
		return nil
	}
	return fmt.Errorf("replicate to NATS stream %q: %w", r.opts.Stream, err)
}

// Remove deletes the copies of records that left the queue, without
// waiting: the deleters send the requests at once. It implements
// spool.Replica.
func (r *NATS) Remove(keys []string) {
	r.mu.Lock()
	for _, k := range keys {
		if seq, ok := r.seqs[k]; ok {
			delete(r.seqs, k)
			r.dels = append(r.dels, seq)
		}
	}
	if len(r.dels) > 0 {
		r.delCond.Broadcast()
	}
	r.mu.Unlock()
}

// deleters is how many delete requests are in flight at most.
const deleters = 16

// deleteLoop sends the pending deletes, one request each (JetStream deletes
// a message by its sequence); a failed one is sent again until it is
// answered or the replication closes: a copy left may be delivered again
// (at-least-once), never lost.
func (r *NATS) deleteLoop() {
	defer r.wg.Done()
	for {
		r.mu.Lock()
		for len(r.dels) == 0 && !r.closed {
			r.delCond.Wait()
		}
		if len(r.dels) == 0 || r.closed && r.abandon {
			r.mu.Unlock()
			return
		}
		seq := r.dels[len(r.dels)-1]
		r.dels = r.dels[:len(r.dels)-1]
		r.deleting++
		r.mu.Unlock()
		r.deleteSeq(seq)
		r.mu.Lock()
		r.deleting--
		r.delCond.Broadcast()
		r.mu.Unlock()
	}
}

// Settled waits until every delete asked for so far has been sent and
// answered (or given up).
func (r *NATS) Settled() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for (len(r.dels) > 0 || r.deleting > 0) && !r.closed {
		r.delCond.Wait()
	}
}

func (r *NATS) deleteSeq(seq uint64) {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		ctx, cancel := context.WithTimeout(context.Background(), r.opts.Timeout)
		err := r.stream.DeleteMsg(ctx, seq)
		cancel()
		if err == nil || errors.Is(err, jetstream.ErrMsgNotFound) || strings.Contains(err.Error(), "no message found") {
			r.removed.Add(1)
			return
		}
		if n := r.delFailed.Add(1); n&(n-1) == 0 { // the 1st, 2nd, 4th, 8th... failure
			r.log.Warn("replication: deleting a delivered webhook's copy failed; retrying", "stream", r.opts.Stream,
				"error", err, "failures", n)
		}
		r.mu.Lock()
		if r.closed {
			// Closing, and the stream does not answer: the deletes left
			// are not waited for; an adopter, or this replica's next
			// start, may deliver those webhooks again.
			if !r.abandon {
				r.abandon = true
				r.log.Warn("replication: closing with deletes unsent; those webhooks may be delivered again",
					"stream", r.opts.Stream, "deletes", len(r.dels)+r.deleting)
			}
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		select {
		case <-time.After(wait):
		case <-r.stop:
		}
	}
}

// Close stops the heartbeat and the watch, sends the pending deletes, and
// closes the connection.
func (r *NATS) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	r.delCond.Broadcast()
	r.mu.Unlock()
	close(r.stop)
	r.adopting.Wait()
	r.wg.Wait()
	r.nc.Drain()
}

// Status is the replication's state for operators (/v1/spool, hookpace
// status).
type Status struct {
	Stream    string `json:"stream"`
	Replica   string `json:"replica"`
	Replicas  int    `json:"replicas"`
	Reachable bool   `json:"reachable"` // connected, and the last publish round was stored
	// OnUnavailable is "refuse" or "local"; LocalOnly counts webhooks
	// acknowledged on the local spool alone since the start, and those of
	// an earlier run the start could not copy to the stream.
	OnUnavailable string `json:"on_unavailable"`
	LocalOnly     int64  `json:"local_only"`
	Published     int64  `json:"published"`
	Removed       int64  `json:"removed"`
	// Lag is how many deletes are still to be sent to the stream.
	Lag          int      `json:"lag"`
	FailedRounds int64    `json:"failed_rounds"`
	Epoch        uint64   `json:"epoch"`            // this replica's lease epoch
	Leases       []string `json:"leases"`           // replicas whose queue this one holds the lease of (itself first)
	Adopting     []string `json:"adopting"`         // adoptions in progress
	Adoptions    int64    `json:"adoptions"`        // finished since the start
	Adopted      int64    `json:"adopted"`          // webhooks taken from adopted queues
	Dropped      int64    `json:"dropped_at_start"` // local webhooks dropped at the start: another replica delivered them
	// LeaseLost: another replica adopted this one's queue while it ran
	// (cut off from the stream for adopt_after); a restart drops what it
	// adopted.
	LeaseLost bool `json:"lease_lost,omitempty"`
}

// Status reports the replication's state.
func (r *NATS) Status() Status {
	mode := "refuse"
	if r.opts.Local {
		mode = "local"
	}
	r.mu.Lock()
	lag := len(r.dels) + r.deleting
	r.mu.Unlock()
	s := Status{Stream: r.opts.Stream, Replica: r.opts.Replica, Replicas: r.opts.Replicas,
		Reachable: r.nc.IsConnected() && !r.down.Load(), OnUnavailable: mode, LocalOnly: r.localOnly.Load(),
		Published: r.published.Load(), Removed: r.removed.Load(), Lag: lag, FailedRounds: r.failures.Load()}
	r.lease.status(&s)
	return s
}
