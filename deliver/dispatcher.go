// Package deliver replays spooled webhooks to their real URLs. The
// Dispatcher keeps, for each destination host with work, a small window of
// messages in memory, asks the host's gate (gate.go) when the next may
// go, sends it on its own goroutine, and applies the verdict: delete,
// hold, retry later or bury in the dead letters.
//
// One mutex guards all dispatcher state. Nothing polls: a host is looked at
// when a message arrives for it, when one of its attempts finishes, or when
// its own timer (one per host, only while it waits for a token, a hold, a
// breaker or a retry) fires.
package deliver

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookpace/hookpace/credential"
	"github.com/hookpace/hookpace/pacer"
	"github.com/hookpace/hookpace/rewrite"
	"github.com/hookpace/hookpace/sign"
	"github.com/hookpace/hookpace/spool"
	"github.com/hookpace/hookpace/window"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// The durable queue the dispatcher works from is four dependencies, split
// by who calls them; *spool.Spool is each of them.

// QueueReader is what the in-memory window reads of the durable queue:
// the announcements of what became durable and reads of a host's queue.
type QueueReader interface {
	// Notify makes the queue announce, from then on, every message that
	// becomes durable, in id order (see spool.Spool.Notify).
	Notify(fn func([]*spool.Message))
	// ReadLane reads, in id order, up to max webhooks of lane l of host's
	// queue with ids above after (package window); Lanes lists the lanes with
	// webhooks queued, and Get reads back one queued webhook
	// (spool.ErrNotQueued: it is not queued any more).
	ReadLane(host string, l spool.Lane, after uint64, max int) ([]*spool.Message, error)
	Lanes(host string) []spool.LaneUsage
	Get(host string, l spool.Lane, id uint64) (*spool.Message, error)
	// ReadHost reads host's whole queue, every lane, a part at a time
	// (for a purge).
	ReadHost(host string, after spool.HostCursor, max int) ([]*spool.Message, spool.HostCursor, error)
}

// QueueStore is the write side of the durable queue: the outcomes of
// attempts, purges and burials, and the hosts' pauses.
type QueueStore interface {
	// DeleteThen removes delivered ms (a webhook, or a batch's members)
	// and returns at once; done is called once the removals are settled,
	// durable or failed (spool.Spool.DeleteThen). done neither blocks nor
	// calls the queue.
	DeleteThen(ms []*spool.Message, done func(error))
	Update(m *spool.Message)
	Bury(m *spool.Message, reason string, at time.Time)
	// Drop removes ms from the queue (a purge by by); DropLater removes m
	// once its attempt in flight has ended; BuryAll moves ms to the dead
	// letters (backlog.go).
	Drop(ms []*spool.Message, by string) (int, error)
	DropLater(m *spool.Message, by string)
	BuryAll(ms []*spool.Message, reason string, at time.Time) (int, error)
	// Begin announces an attempt of m, off the dispatcher's lock: it may
	// wait for a replacement of m being written (a coalesced webhook) and
	// returns by how much m grew; End says the attempt is over.
	Begin(m *spool.Message) (grew int64)
	End(m *spool.Message)
	// SetPaused records durably that host is paused (or no longer is);
	// Paused lists the hosts so recorded.
	SetPaused(host string, paused bool) error
	Paused() ([]string, error)
}

// QueueStats is what the durable queue counts, for the hosts' status.
type QueueStats interface {
	HostUsage(host string) spool.HostUsage
	Hosts() map[string]spool.HostUsage
	// HostCoalesced and HostDeduped count, for host, the webhooks that
	// replaced a queued one and those answered as duplicates.
	HostCoalesced(host string) int64
	HostDeduped(host string) int64
}

// Journal keeps the history of attempts (maxage.go). Whether it keeps
// anything is the journal's own setting: the dispatcher records every
// attempt and every delivered webhook's request.
type Journal interface {
	// RecordAttempt journals one attempt of m; JournalResponseBody is how
	// much of an answer's body it keeps (0: none).
	RecordAttempt(m *spool.Message, a spool.Attempt)
	JournalResponseBody() int
	// JournalBody keeps delivered m's request, to be sent again
	// (journal.bodies).
	JournalBody(m *spool.Message)
}

var (
	_ QueueReader = (*spool.Spool)(nil)
	_ QueueStore  = (*spool.Spool)(nil)
	_ QueueStats  = (*spool.Spool)(nil)
)

// Policy is everything the dispatcher needs to know about one host.
type Policy struct {
	Limits             pacer.Limits
	Timeout            time.Duration
	MaxAttempts        int
	MaxAge             time.Duration
	AutoPauseAfter     time.Duration // pause the host after failing this long without a success (maxage.go); 0: never
	BackoffInitial     time.Duration
	BackoffMax         time.Duration
	Retry4xx           []int
	UpgradeTLS         bool
	InsecureSkipVerify bool
	// IDHeader and AttemptHeader name the headers that carry the message's
	// id and the attempt number (1 for the first) to the receiver; empty:
	// not sent.
	IDHeader      string
	AttemptHeader string
	// PartnerLimits obeys what the partner's answers say of its limits
	// (see partner.go); PartnerLimitsTTL is how long a learned limit lasts
	// without being said again (default 10 minutes).
	PartnerLimits    bool
	PartnerLimitsTTL time.Duration
	// Signer signs each attempt (package sign); nil: not signed. It never
	// signs a webhook an inbound route's door took in (spool.HeaderDoor):
	// Doors[route] signs that, and a route without one signs nothing.
	Signer *sign.Signer
	Doors  map[string]*sign.Signer
	// Rewrite sets and removes headers of each attempt, before hookpace's
	// own are set and before signing (package rewrite); nil: none.
	Rewrite *rewrite.Headers
	// RewriteRules describes the host's rewrite rules, headers and JSON,
	// for the status page ("" for none).
	RewriteRules string
	// Batch sends webhooks to the same URL with JSON bodies together
	// (batch.go); nil: one webhook per request.
	Batch *Batch
	// Auth attaches the host's credentials to each attempt (package
	// credential); nil: none.
	Auth *credential.Credentials
	// Weights are the fairness keys' weights (fairness.weights): a key
	// with weight 3 gets three turns to another's one. A key not named
	// weighs 1.
	Weights map[string]int
	// MinShare is the least share of a fairness key's turns that its
	// lower priorities get while they have work (priority.min_share;
	// default 0.1).
	MinShare float64
}

// Observer receives delivery metrics; *telemetry.Metrics is the real one.
type Observer interface {
	Delivery(ctx context.Context, host string, outcome Outcome)
	DeliveryLatency(ctx context.Context, host string, d time.Duration)
	// BatchWebhooks counts the n webhooks a batched attempt carried, by
	// the attempt's outcome.
	BatchWebhooks(ctx context.Context, host string, outcome Outcome, n int)
}

// Options configure a Dispatcher.
type Options struct {
	// Reader, Store, Stats and Journal are the durable queue (usually
	// one *spool.Spool as all four); each is required.
	Reader  QueueReader
	Store   QueueStore
	Stats   QueueStats
	Journal Journal
	// Policy gives a host's policy. Hosts may share the one it returns:
	// the dispatcher never changes a Policy.
	Policy func(host string) *Policy
	// Client sends webhooks; Insecure is used for hosts with
	// insecure_skip_verify. Neither may follow redirects or use a proxy.
	Client   *http.Client
	Insecure *http.Client
	Logger   *slog.Logger
	Observer Observer
	Tracer   trace.Tracer
	Prop     propagation.TextMapPropagator
	// Throttle limits how often identical failures are logged; nil logs all.
	Throttle interface {
		Allow(key string, now time.Time) (bool, int)
	}
	// MaxBuffered bounds the memory that the messages held over all
	// hosts take, bodies and what a decoded message costs besides
	// (default 8 MiB: full windows for a few busy hosts). It holds for
	// the total: each host reads from the spool within its share (see
	// buffer.go).
	MaxBuffered int64
	// IdleTTL is how long a host with nothing queued and nothing to
	// remember (see pacer.Host.Idle) is kept before it is forgotten, so
	// that a stream of new destinations doesn't grow memory without bound
	// (default 10 minutes).
	IdleTTL time.Duration
	// Gates share each host's limits with other replicas (gate.go); nil:
	// every host paces alone on its pacer.Host.
	Gates Gates
	// MaxInFlight bounds the attempts in flight over all hosts (slots.go;
	// default DefaultMaxInFlight).
	MaxInFlight int
	// Events receives the dispatcher's operational events (a webhook
	// died, a breaker opened or closed, a host paused itself); nil:
	// none. It is called on the dispatcher's lock and must not block.
	Events func(Event)
}

// Event is an operational event, which package events sends to the
// operator's own endpoint as a webhook.
type Event struct {
	Type string // e.g. "message.dead", "breaker.opened"
	Host string
	At   time.Time
	Data map[string]any // the event's other fields, as JSON will show them
}

// Dispatcher replays queued webhooks. Create it with New and start it with
// Start, which connects it to its queue.
type Dispatcher struct {
	opts       Options
	log        *slog.Logger
	propFields []string       // the headers opts.Prop reads (trace.go)
	winShared  *window.Shared // the reader and logger every host's window uses

	ctx    context.Context // attempts run under it; cancelled to abandon them
	cancel context.CancelFunc
	wg     sync.WaitGroup

	purges purges // backlog control (backlog.go), guarded by mu

	delivered atomic.Int64 // webhooks delivered since the start (Delivered)

	// landed are the deliveries whose deletes are settled, for land
	// (slots.go); landMu guards it alone, as the queue's writer adds to
	// it.
	landMu sync.Mutex
	landed []*landing

	mu        sync.Mutex
	hosts     map[string]*host
	buffered  int64 // what the messages held in memory cost (buffer.go)
	bufferedN int64 // how many they are
	loads     chan struct{}
	stopping  bool

	inFlight  int         // attempts in flight over all hosts (slots.go)
	unsettled int         // deliveries answered 2xx, slot given back, delete not settled yet (slots.go)
	slotQ     slotWait    // hosts waiting for one of them
	serving   *host       // the host a freed slot was handed to
	sweeper   *time.Timer // forgets idle hosts; armed while there are hosts

	// pauseMu makes each Pause or Resume record and apply its change as
	// one step, so that the queue's record and the pacers agree.
	pauseMu sync.Mutex
	pausing sync.WaitGroup // records of what the gates learned (pause.go)
	// unrecorded holds, by host, a pause (true) or resume (false) applied
	// while the disk was too full to record it; recordRetry tries again
	// while it has any. Both under pauseMu.
	unrecorded  map[string]bool
	recordRetry *time.Timer

	idle     chan func()   // idle delivery goroutines wait here for their next attempt
	quit     chan struct{} // closed by Stop: idle delivery goroutines exit
	quitOnce sync.Once
}

type noopObserver struct{}

func (noopObserver) Delivery(context.Context, string, Outcome)              {}
func (noopObserver) DeliveryLatency(context.Context, string, time.Duration) {}
func (noopObserver) BatchWebhooks(context.Context, string, Outcome, int)    {}

// New returns a dispatcher; it sends nothing until Start.
func New(opts Options) *Dispatcher {
	if opts.Reader == nil || opts.Store == nil || opts.Stats == nil || opts.Journal == nil {
		panic("deliver.New: Options.Reader, Store, Stats and Journal are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Observer == nil {
		opts.Observer = noopObserver{}
	}
	if opts.Tracer == nil {
		opts.Tracer = noop.NewTracerProvider().Tracer("")
	}
	if opts.Prop == nil {
		opts.Prop = propagation.TraceContext{}
	}
	if opts.MaxBuffered <= 0 {
		opts.MaxBuffered = 8 << 20
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	if opts.IdleTTL <= 0 {
		opts.IdleTTL = 10 * time.Minute
	}
	if opts.Insecure == nil {
		opts.Insecure = opts.Client
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &Dispatcher{opts: opts, log: opts.Logger, propFields: canonicalFields(opts.Prop), ctx: ctx, cancel: cancel, hosts: make(map[string]*host),
		idle: make(chan func()), quit: make(chan struct{}), loads: make(chan struct{}, maxLoads)}
	d.winShared = window.NewShared(opts.Reader, d.log, nil)
	if opts.Gates != nil {
		opts.Gates.Bind(d.gatesWoke, d.pausedElsewhere)
	}
	return d
}

// Start connects the dispatcher to its queue and starts delivering: it
// pauses again the hosts recorded as paused, subscribes to the queue's
// announcements, and picks up every host that has messages queued (after a
// restart: everything that was queued or in flight). It holds its lock
// throughout, so an announcement made meanwhile waits for it; a message
// both announced and counted in the backlog is read once (see
// enqueueLocked). Call it once.
func (d *Dispatcher) Start() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	paused, err := d.opts.Store.Paused()
	if err != nil {
		return fmt.Errorf("read paused hosts: %w", err)
	}
	for _, name := range paused {
		d.hostLocked(name).gate.Pause()
	}
	d.opts.Reader.Notify(d.enqueued)
	for name, u := range d.opts.Stats.Hosts() {
		if u.Messages > 0 {
			d.hostLocked(name).win.Resume()
		}
	}
	for _, h := range d.hosts {
		d.pump(h)
	}
	return nil
}

// host is the dispatcher's state for one destination.
type host struct {
	name string
	pol  *Policy
	gate Gate
	d    *Dispatcher

	// pace is the pacer of a host pacing alone (localGate); nil while
	// the host is at rest, when clean is its count of clean successes
	// (see pacer.Host.Resting).
	pace *pacer.Host
	// win is what of h's queue is in memory: its lanes, what they staged
	// to go next and what waits for a retry (package window).
	win window.Host

	buffered int64 // what h's messages in memory cost (buffer.go)

	timer  *time.Timer
	wakeAt time.Time

	learn *learned // the partner's stated limit, if below the configured one (partner.go)

	// sending is h's attempts between the gate's Acquire and Release:
	// what the gate counts in flight, known without asking it, so that
	// the Backlog methods a gate calls under its own lock never call it.
	sending int

	slotWaiting bool  // h is in d.slotQ (slots.go)
	landing     bool  // a delete of h's landed: land pumps h once (slots.go)
	clean       int32 // see pace
	unsettled   int   // deliveries answered 2xx, slot given back, delete not settled yet (slots.go)

	// Batching (batch.go): extra counts the batch members in flight
	// beyond one per slot; batches counts delivered batches.
	extra   int
	batches batchCount

	delivered int64 // webhooks delivered since the host was taken up

	// trouble is what h remembers of failures: nil until the first
	// (troubleW), read through troubleR, which gives the zero value
	// while there is none.
	trouble *trouble

	active int64 // last message announced or attempt finished (Unix ns)
}

// trouble is the part of a host that only failures write.
type trouble struct {
	lastErr    string
	lastErrAt  time.Time
	lastStatus int

	// The breaker's outage (events.go): when it opened from closed, and
	// the half-open probes that failed since.
	outageAt     time.Time
	outageProbes int
}

// noTrouble is what troubleR gives a host without failures: never
// written.
var noTrouble trouble

func (h *host) troubleR() *trouble {
	if h.trouble == nil {
		return &noTrouble
	}
	return h.trouble
}

func (h *host) troubleW() *trouble {
	if h.trouble == nil {
		h.trouble = new(trouble)
	}
	return h.trouble
}

func (d *Dispatcher) hostLocked(name string) *host {
	h := d.hosts[name]
	if h == nil {
		pol := d.opts.Policy(name)
		now := time.Now()
		h = &host{name: name, pol: pol, active: now.UnixNano(), d: d}
		h.win.Init(window.Options{Name: name, Shared: d.winShared, Env: h, Policy: h.windowPolicy()})
		if d.opts.Gates != nil {
			h.gate = d.opts.Gates.Gate(name, h.limits(), now, h)
		} else {
			h.pace = pacer.New(h.limits(), now)
			h.gate = (*localGate)(h)
		}
		d.hosts[name] = h
		d.armSweeper()
	}
	return h
}

func (h *host) count() int {
	return h.win.Held() + h.Busy()
}

// pump starts every attempt h may make now: while its window has a pick
// and its gate allows, attempt; then upkeep.
func (d *Dispatcher) pump(h *host) {
	if d.stopping {
		return
	}
	now := time.Now()
	if h.learn != nil {
		d.expireLocked(h, now)
	}
	var wait, blocked time.Time
	for {
		p, until := d.nextPick(h, now)
		if p.Empty() {
			wait = until // a batch waits for company (batch.go)
			break
		}
		lease, ok, at := d.allow(h, now)
		if !ok {
			wait, blocked = at, at
			break
		}
		d.launch(h, h.take(p), now, lease)
	}
	d.upkeep(h, now, wait, blocked)
}

// nextPick is what h sends next (host.next), once every webhook at the
// head that passed max_age has gone to the dead letters (maxage.go).
func (d *Dispatcher) nextPick(h *host, now time.Time) (window.Pick, time.Time) {
	d.expireHeads(h, now)
	return h.next(now)
}

// allow takes one of the global slots for h and asks its gate for an
// attempt now. If the gate refuses, at is when it may allow one; at its
// settle cap or without a slot, at is zero (land or slotDone pumps h
// again when a delete lands or its turn comes).
func (d *Dispatcher) allow(h *host, now time.Time) (lease string, ok bool, at time.Time) {
	if h.atSettleCap() || !d.haveSlot(h) {
		return "", false, time.Time{}
	}
	breaker, _ := h.gate.Breaker()
	ok, at, lease = h.gate.Acquire(now)
	if ok {
		h.sending++
	}
	if breaker == pacer.BreakerOpen {
		d.breakerChanged(h, breaker, "")
	}
	return lease, ok, at
}

// launch runs an attempt of r on a delivery goroutine, holding the slot
// and the gate's lease allow took.
func (d *Dispatcher) launch(h *host, r request, sentAt time.Time, lease string) {
	d.wg.Add(1)
	d.tookSlot(h)
	pol := h.pol // a reload replaces h.pol, never changes it
	d.run(func() { d.attempt(h, r, pol, sentAt, lease) })
}

// upkeep, after pump's attempts, keeps h's window (window.Host.Upkeep):
// it lets go of what h holds if its gate blocked it for long, and not
// while a purge of h reads its queue; then it arranges for pump again
// when the earliest of wait and the window's own wake (a retry, a read,
// the head's max_age) is due.
func (d *Dispatcher) upkeep(h *host, now, wait, blocked time.Time) {
	h.gate.Pumped(now)
	var spillUntil time.Time
	if h.blockedLong(blocked, now) {
		spillUntil = blocked
	}
	wake := earliest(wait, h.win.Upkeep(now, spillUntil, len(d.purges.loading[h.name]) == 0))
	if !wake.IsZero() {
		d.wake(h, wake)
	}
}

// wake arranges for pump(h) at t, unless it is already due sooner.
func (d *Dispatcher) wake(h *host, t time.Time) {
	if h.timer != nil && !h.wakeAt.IsZero() && !h.wakeAt.After(t) {
		return
	}
	h.wakeAt = t
	dur := time.Until(t)
	if h.timer == nil {
		h.timer = time.AfterFunc(dur, func() {
			d.mu.Lock()
			defer d.mu.Unlock()
			h.wakeAt = time.Time{}
			d.pump(h)
		})
		return
	}
	h.timer.Reset(dur)
}
