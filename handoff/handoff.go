// Package handoff re-sends what is still queued in a stopping hookpace to
// another hookpace's proxy listener, in proxy form (same method, URL,
// stored headers and body), and deletes each webhook locally only once
// that hookpace answered 202: from then on the webhook is durable there.
//
// An ordering key's webhooks go as one batch, which the other hookpace
// stores whole or not at all (see BatchHeader): a key is never split
// between the two by a hand-off cut short.
//
// It runs at ingest speed, not at the partners' pace: the receiving
// hookpace paces them by its own limits. A 429 is retried after its
// Retry-After while the budget (the context's deadline) allows, and a
// connection error after a backoff while the budget less a margin allows;
// any other answer keeps the webhook here, for a restart on the same
// volume.
package handoff

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// Header carries a handed-off webhook's lineage: the sender's name and
// the webhook's id ("pod-a/<32 hex digits>"). The receiving hookpace logs
// it and keeps the id (see Origin): the app's 202 named it, and receivers
// de-duplicate on it. The header itself is not stored: the partner gets
// what the app sent.
const Header = "X-Hookpace-Handoff-From"

// Origin returns the webhook id that a Header value carries, if it is a
// whole one (with its spool part; an older hookpace sent ids without).
func Origin(from string) (spool.Ref, bool) {
	i := strings.LastIndexByte(from, '/')
	if i < 0 {
		return spool.Ref{}, false
	}
	ref, err := spool.ParseRef(from[i+1:])
	if err != nil || ref.Spool == 0 {
		return spool.Ref{}, false
	}
	return ref, true
}

// Queue is the spool as the hand-off sees it; *spool.Spool is the real one.
// Nothing else may read or delete its messages meanwhile (the dispatcher
// has stopped).
type Queue interface {
	Hosts() map[string]spool.HostUsage
	// ReadHost reads every lane of host's queue (see spool.ReadHost).
	ReadHost(host string, after spool.HostCursor, max int) ([]*spool.Message, spool.HostCursor, error)
	// HandedOff removes a message handed off to to, journaled as such, and
	// returns once that is durable.
	HandedOff(m *spool.Message, to string) error
}

var _ Queue = (*spool.Spool)(nil)

// Options configure Run.
type Options struct {
	// Target is the other hookpace's proxy listener, http://host:port,
	// with optional user:password@ for its proxy auth.
	Target string
	// Auth, if set, is "username:password" for Target's proxy auth, as
	// ReadAuth reads it from shutdown.handoff_auth_file (server.LoadFiles
	// does, at check-config, start and reload).
	Auth string
	// From names this hookpace in the lineage header; default the host name.
	From string
	// Secret, if set, signs each hand-off (SignatureHeader), so that the
	// receiving hookpace, configured with the same one, keeps the ids.
	Secret []byte
	// Hosts are the hosts' pauses and holds to carry (see HostState), on
	// the first webhook of each; only with a Secret.
	Hosts map[string]HostState
	Queue Queue
	// Concurrency is the number of hand-offs in flight at once (default
	// 64). A crash mid-hand-off repeats at most this many: each keeps its
	// slot until its local delete is durable.
	Concurrency int
	// Client sends the hand-offs; default one of its own that never reads
	// proxy settings from the environment.
	Client *http.Client
	Logger *slog.Logger

	sleep func(ctx context.Context, d time.Duration) bool // tests: the retries' wait
	now   func() time.Time                                // tests: the retries' clock
}

// Result says what a hand-off did.
type Result struct {
	Queued    int // webhooks queued when it began
	HandedOff int // answered 202 there and deleted here
	Left      int // still queued here
	// Kept: why webhooks stayed, by reason: status_503, 202_without_id,
	// 429_past_budget, connection_error, timeout, local_delete_failed,
	// behind_kept_ordered (an earlier webhook of its ordering key stayed),
	// behind_kept_host_state (KeptBehindState), key_kept_whole
	// (KeptKeyWhole), key_too_large (KeptTooLarge), keys_held_too_much
	// (KeptHeldTooMuch), batch_lost.
	Kept map[string]int
	// Retried is the connection errors (and 503s with a Retry-After)
	// retried after a wait.
	Retried int
	// Keys is the ordering keys handed off whole; KeysKept those that
	// stayed here whole; KeysSplit those whose first webhooks are there
	// and the rest here (a receiver that stored part of a key and
	// refused the rest, or an older one that stores them one by one).
	Keys, KeysKept, KeysSplit int
	Took                      time.Duration
}

// Rate is the hand-offs per second.
func (r Result) Rate() float64 {
	if r.Took <= 0 {
		return 0
	}
	return float64(r.HandedOff) / r.Took.Seconds()
}

// DefaultConcurrency is Options.Concurrency's default.
const DefaultConcurrency = 64

// batch is how many messages are read from the spool at a time.
const batch = 256

// Run hands off every queued webhook, until all went or ctx is done.
// The webhooks of one ordering key (of one host and fairness key) go as
// one batch (see BatchHeader), in their order, by one worker: the other
// hookpace stores them all or none, and they are deleted here only once
// it has stored them all. A key that cannot go whole stays here whole.
func Run(ctx context.Context, o Options) (Result, error) {
	start := time.Now()
	s, err := newSender(o)
	if err != nil {
		return Result{}, err
	}
	t := &tally{res: Result{Kept: map[string]int{}}, s: s}
	for _, u := range o.Queue.Hosts() {
		t.res.Queued += int(u.Messages)
	}
	shared := make(chan *spool.Message)
	own := make([]chan item, s.concurrency) // per worker: ordering keys
	var wg sync.WaitGroup
	for i := range own {
		own[i] = make(chan item, batch/len(own)+1)
		wg.Go(func() { s.work(ctx, own[i], shared, t) })
	}
	readErr := s.feed(ctx, shared, own, t)
	close(shared)
	for _, c := range own {
		close(c)
	}
	wg.Wait()
	res := t.res
	res.Retried = int(s.retries.Load())
	for _, u := range o.Queue.Hosts() {
		res.Left += int(u.Messages)
	}
	res.Took = time.Since(start)
	return res, readErr
}

// keptBehind is why a webhook of an ordering key stays: an earlier one of
// its key was kept.
const keptBehind = "behind_kept_ordered"

// item is what the feed gives the worker that owns an ordering key: its
// next webhook, a batch the feed began (its first webhook carried the
// host's state), or the key's end (its host's queue is read).
type item struct {
	m   *spool.Message
	kb  *keyBatch
	end string // the key that ended
}

// work hands off what it is given, the ordering keys it owns from own
// (each key's webhooks in their order, as one batch) and any other
// webhook from shared, until both are closed. A key whose end never came
// (the budget ran out while its host was read) stays here whole.
func (s *sender) work(ctx context.Context, own <-chan item, shared <-chan *spool.Message, t *tally) {
	open := map[string]*keyBatch{}
	for own != nil || shared != nil {
		select {
		case it, ok := <-own:
			if !ok {
				own = nil
				continue
			}
			switch {
			case it.end != "":
				if kb := open[it.end]; kb != nil {
					s.commit(ctx, kb, t)
					delete(open, it.end)
				}
			case it.kb != nil:
				open[orderKey(it.m)] = it.kb
			default:
				key := orderKey(it.m)
				kb := open[key]
				if kb == nil {
					kb = newKeyBatch(HostState{})
					open[key] = kb
				}
				s.add(ctx, kb, it.m, t)
			}
		case m, ok := <-shared:
			if !ok {
				shared = nil
				continue
			}
			newID, reason := s.handOff(ctx, m, HostState{})
			t.record(m, newID, reason)
		}
	}
	for _, kb := range open {
		if !kb.failed && !kb.legacy {
			s.keep(kb, "timeout", t)
		}
	}
}

// tally counts what the workers did.
type tally struct {
	mu  sync.Mutex
	res Result
	s   *sender
}

func (t *tally) record(m *spool.Message, newID, reason string) {
	t.mu.Lock()
	if reason == "" {
		t.res.HandedOff++
	} else {
		t.res.Kept[reason]++
		if t.res.Kept[reason] == 1 {
			t.s.log.Warn("handoff: webhook kept here", "id", m.Ref().String(), "host", m.Host,
				"target", t.s.target.Redacted(), "reason", reason, "note", "further ones for the same reason are counted at the end")
		}
	}
	t.mu.Unlock()
	if reason == "" {
		t.s.log.Info("handoff", "id", m.Ref().String(), "host", m.Host, "new_id", newID, "target", t.s.target.Host)
	}
}

// orderKey names m's ordering key within its host and fairness key, or is
// "" for a webhook without one.
func orderKey(m *spool.Message) string {
	if m.Ordering == "" {
		return ""
	}
	return m.Host + "\x00" + m.Fairness + "\x00" + m.Ordering
}

// feed reads every host's queue, every lane of it (spool.ReadHost), each
// lane in FIFO order, and hands the messages to the workers: those of an
// ordering key to the worker its key hashes to, in order, then the key's
// end once the host is read; the others to any. A host with a state to
// carry (Options.Hosts) has its first webhook handed off here, with the
// state, before any other of it goes (as its key's batch's first chunk,
// if it has an ordering key); if that one is kept, so are the others. It
// stops when the queue is read or ctx is done.
func (s *sender) feed(ctx context.Context, shared chan<- *spool.Message, own []chan item, t *tally) error {
	usage := s.queue.Hosts()
	hosts := make([]string, 0, len(usage))
	for h := range usage {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	for _, h := range hosts {
		var after spool.HostCursor
		state, carry := s.hosts[h]
		keep := false               // the state's webhook was kept: so are the others
		keys := map[string]uint32{} // the host's ordering keys, by owner
		for {
			msgs, next, err := s.queue.ReadHost(h, after, batch)
			if err != nil {
				return fmt.Errorf("handoff: read %s's queue: %w", h, err)
			}
			for _, m := range msgs {
				key := orderKey(m)
				var owner uint32
				if key != "" {
					f := fnv.New32a()
					f.Write([]byte(key))
					owner = f.Sum32() % uint32(len(own))
					keys[key] = owner
				}
				it := item{m: m}
				if carry || keep {
					var kb *keyBatch
					keep, kb = s.carry(ctx, m, state, keep, t)
					carry = false
					if kb == nil {
						continue
					}
					it.kb = kb
				}
				to := own[owner]
				if key == "" {
					select {
					case shared <- m:
					case <-ctx.Done():
						return nil
					}
					continue
				}
				select {
				case to <- it:
				case <-ctx.Done():
					return nil
				}
			}
			after = next
			if len(msgs) < batch {
				break
			}
		}
		for key, owner := range keys {
			select {
			case own[owner] <- item{end: key}:
			case <-ctx.Done():
				return nil
			}
		}
	}
	return nil
}

// carry hands off m with its host's state, unless an earlier one carrying
// it was kept, and reports whether the host's other webhooks must stay
// here. An m with an ordering key goes as the first chunk of its key's
// batch, which it returns for the key's owner to go on with.
func (s *sender) carry(ctx context.Context, m *spool.Message, state HostState, kept bool, t *tally) (bool, *keyBatch) {
	if kept {
		t.record(m, "", KeptBehindState)
		return true, nil
	}
	if m.Ordering != "" {
		kb := newKeyBatch(state)
		if !s.add(ctx, kb, m, t) {
			return true, nil
		}
		s.log.Info("handoff: host state carried", "host", m.Host, "state", state.Encode(), "target", s.target.Host)
		return false, kb
	}
	newID, reason := s.handOff(ctx, m, state)
	t.record(m, newID, reason)
	if reason == "" {
		s.log.Info("handoff: host state carried", "host", m.Host, "state", state.Encode(), "target", s.target.Host)
	}
	return reason != "", nil
}

// ReadAuth reads a file of hand-off credentials (a mounted Secret):
// "username:password", less a trailing line break.
func ReadAuth(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	user := strings.TrimRight(string(b), "\r\n")
	if !strings.Contains(user, ":") {
		return "", fmt.Errorf("%s: want username:password", path)
	}
	return user, nil
}

// sender sends one webhook at a time per worker.
type sender struct {
	target      *url.URL // without credentials
	auth        string   // Proxy-Authorization value, or ""
	from        string
	secret      []byte
	hosts       map[string]HostState
	queue       Queue
	client      *http.Client
	concurrency int
	log         *slog.Logger
	// now and sleep are the clock of the retries (tests replace them);
	// retries counts the connection errors retried.
	now     func() time.Time
	sleep   func(ctx context.Context, d time.Duration) bool
	retries atomic.Int64
	// legacyOnce logs, once, a target that stores ordered webhooks one
	// by one.
	legacyOnce sync.Once
	// held is the bytes of bodies held for the keys under way (maxHeld).
	held atomic.Int64
}

func newSender(o Options) (*sender, error) {
	u, err := url.Parse(o.Target)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("handoff: target %q: want http://host:port", o.Target)
	}
	s := &sender{from: o.From, secret: o.Secret, queue: o.Queue, client: o.Client, concurrency: o.Concurrency, log: o.Logger,
		now: time.Now, sleep: sleepCtx}
	if o.sleep != nil {
		s.sleep = o.sleep
	}
	if o.now != nil {
		s.now = o.now
	}
	user := ""
	if u.User != nil {
		pw, _ := u.User.Password()
		user = u.User.Username() + ":" + pw
		u.User = nil
	}
	if o.Auth != "" {
		user = o.Auth
	}
	if user != "" {
		s.auth = basicAuth(user)
	}
	s.target = u
	if s.from == "" {
		s.from, _ = os.Hostname()
	}
	if o.Secret != nil {
		s.hosts = o.Hosts // unsigned, the other hookpace would not apply them
	}
	if s.concurrency <= 0 {
		s.concurrency = DefaultConcurrency
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.client == nil {
		s.client = &http.Client{
			Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: s.concurrency, DisableCompression: true,
				IdleConnTimeout: 30 * time.Second},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return s, nil
}
