// Package events sends hookpace's own operational events to
// the operator's endpoint, events.url: a webhook died, a breaker opened or
// closed, a host was held too long or paused itself, the spool crossed its
// watermarks, a hand-off ended.
//
// Each event is a Standard Webhooks JSON payload,
//
//	{"type": "message.dead", "timestamp": "2026-11-25T16:00:00.123Z", "data": {"host": "api.partner.example", ...}}
//
// appended to the spool as a webhook for events.url. From there it goes
// as any webhook does: durable, paced by the events host's limits,
// retried, signed by its sign block (events.sign), with the message's id
// as its webhook-id. The events host is a queue of its own, so a dead
// partner holds up none of them, and the events host's own dead letters,
// breaker and holds are not reported (they would only queue behind
// themselves).
//
// Emit never blocks: the dispatcher calls it on its lock. Events wait in
// a bounded buffer for the goroutine that appends them; when it is full,
// an event is dropped, counted and logged.
package events

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/spool"
)

// Spool is where events are appended; *spool.Spool is the real one.
type Spool interface {
	// AppendEvent appends m past the watermarks, while m's host holds
	// fewer than max messages.
	AppendEvent(m *spool.Message, max int64) error
}

// Options configure an Emitter.
type Options struct {
	URL    string // events.url
	Host   string // its queue key (proxy.HostKey)
	Spool  Spool
	Logger *slog.Logger
	// HeldAfter: a host held longer than this is reported (Watch).
	HeldAfter time.Duration
	// Buffer bounds the events waiting to be appended (default 1024);
	// MaxQueued bounds the events queued for the events host in the
	// spool (default 10,000).
	Buffer    int
	MaxQueued int64
}

// Emitter appends operational events to the spool. A nil *Emitter (no
// events.url) drops every event.
type Emitter struct {
	opts Options
	log  *slog.Logger
	in   chan deliver.Event

	mu      sync.Mutex
	cond    *sync.Cond
	pending int  // emitted, not yet appended (or dropped)
	closed  bool // Close was called: Emit drops

	dropped   atomic.Int64 // buffer full, or the spool refused
	skipped   atomic.Int64 // about the events host itself
	appended  atomic.Int64
	done      chan struct{}
	closeOnce sync.Once

	w watchState // Watch's state (watch.go), its goroutine's alone
}

// New starts an emitter; Close stops it.
func New(o Options) *Emitter {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Buffer <= 0 {
		o.Buffer = 1024
	}
	if o.MaxQueued <= 0 {
		o.MaxQueued = 10_000
	}
	e := &Emitter{opts: o, log: o.Logger, in: make(chan deliver.Event, o.Buffer), done: make(chan struct{})}
	e.cond = sync.NewCond(&e.mu)
	go e.run()
	return e
}

// Emit queues ev for the spool without blocking. An event about the
// events host itself is not sent.
func (e *Emitter) Emit(ev deliver.Event) {
	if e == nil {
		return
	}
	if ev.Host != "" && ev.Host == e.opts.Host {
		e.skipped.Add(1)
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		e.dropped.Add(1)
		return
	}
	select {
	case e.in <- ev:
		e.pending++
	default:
		if e.dropped.Add(1) == 1 {
			e.log.Warn("operational event dropped: too many waiting to be spooled (later drops are counted, not logged)",
				"type", ev.Type, "host", ev.Host, "buffer", e.opts.Buffer)
		}
	}
}

// Flush waits until every event emitted so far is in the spool (or was
// dropped).
func (e *Emitter) Flush() {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for e.pending > 0 {
		e.cond.Wait()
	}
}

// Close flushes and stops the emitter; later events are dropped. It logs
// what was dropped, if anything.
func (e *Emitter) Close() {
	if e == nil {
		return
	}
	e.closeOnce.Do(func() {
		e.Flush()
		e.mu.Lock()
		e.closed = true
		close(e.in)
		e.mu.Unlock()
		<-e.done
		if n := e.dropped.Load(); n > 0 {
			e.log.Warn("operational events dropped since the start", "dropped", n, "sent_to_spool", e.appended.Load())
		}
	})
}

// Counts says how many events went to the spool, and how many were
// dropped (a full buffer, a refusal) or skipped (about the events host).
func (e *Emitter) Counts() (appended, dropped, skipped int64) {
	if e == nil {
		return 0, 0, 0
	}
	return e.appended.Load(), e.dropped.Load(), e.skipped.Load()
}

// maxRound bounds the events appended at once (one group commit).
const maxRound = 64

// run appends what Emit queued, a round at a time: the events waiting
// are appended together, so that one commit serves them all.
func (e *Emitter) run() {
	defer close(e.done)
	round := make([]deliver.Event, 0, maxRound)
	for ev := range e.in {
		round = append(round[:0], ev)
	more:
		for len(round) < maxRound {
			select {
			case ev, ok := <-e.in:
				if !ok {
					break more
				}
				round = append(round, ev)
			default:
				break more
			}
		}
		e.appendAll(round)
		e.mu.Lock()
		e.pending -= len(round)
		e.cond.Broadcast()
		e.mu.Unlock()
	}
}

// appendAll appends the round's events, concurrently.
func (e *Emitter) appendAll(round []deliver.Event) {
	var wg sync.WaitGroup
	for _, ev := range round {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.append(ev)
		}()
	}
	wg.Wait()
}

func (e *Emitter) append(ev deliver.Event) {
	m, err := e.Message(ev)
	if err == nil {
		err = e.opts.Spool.AppendEvent(m, e.opts.MaxQueued)
	}
	if err != nil {
		e.dropped.Add(1)
		e.log.Warn("operational event not spooled", "type", ev.Type, "host", ev.Host, "events_url", spool.RedactURL(e.opts.URL), "error", err)
		return
	}
	e.appended.Add(1)
	e.log.Debug("operational event spooled", "type", ev.Type, "host", ev.Host, "id", m.Ref().String())
}

// Payload is an event as its receiver gets it: Standard Webhooks JSON.
type Payload struct {
	Type      string         `json:"type"`
	Timestamp time.Time      `json:"timestamp"`
	Data      map[string]any `json:"data"`
}

// Message is ev as the webhook that carries it to events.url.
func (e *Emitter) Message(ev deliver.Event) (*spool.Message, error) {
	body, err := json.Marshal(payload(ev))
	if err != nil {
		return nil, err
	}
	return &spool.Message{
		Host:     e.opts.Host,
		Method:   http.MethodPost,
		URL:      e.opts.URL,
		Header:   http.Header{"Content-Type": {"application/json"}, "User-Agent": {"hookpace-events"}},
		Body:     body,
		Enqueued: time.Now(),
	}, nil
}

// payload is ev's Standard Webhooks form: Data with the host, and with
// every URL redacted (the one rule, spool.RedactURL), whoever built it.
func payload(ev deliver.Event) Payload {
	at := ev.At
	if at.IsZero() {
		at = time.Now()
	}
	data := make(map[string]any, len(ev.Data)+1)
	for k, v := range ev.Data {
		if s, ok := v.(string); ok && (k == "url" || strings.HasSuffix(k, "_url") || k == "target") {
			v = spool.RedactURL(s)
		}
		data[k] = v
	}
	if ev.Host != "" {
		data["host"] = ev.Host
	}
	return Payload{Type: ev.Type, Timestamp: at.UTC(), Data: data}
}
