package server

import (
	"context"
	"os"
	"time"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/events"
	"github.com/hookpace/hookpace/handoff"
	"github.com/hookpace/hookpace/spool"
)

// startEvents starts the emitter of operational events when events.url is
// set (package events); a.events stays nil otherwise, and every use of it
// does nothing.
func (a *app) startEvents(cfg *config.Config) {
	if !cfg.Events.Enabled() {
		return
	}
	a.events = events.New(events.Options{URL: cfg.Events.URL, Host: cfg.Events.Host, Spool: a.spool,
		Logger: a.log, HeldAfter: cfg.Events.HeldAfter.D()})
	a.undo = append(a.undo, a.events.Close)
	a.log.Info("operational events on", "events_url", spool.RedactURL(cfg.Events.URL), "host", cfg.Events.Host,
		"held_after", cfg.Events.HeldAfter.D().String())
}

// eventsHook is what the dispatcher reports its events to; nil without
// events.
func (a *app) eventsHook() func(deliver.Event) {
	if a.events == nil {
		return nil
	}
	return a.events.Emit
}

// watchEvents looks for watermark crossings and long holds until ctx is
// done (serve's watch).
func (a *app) watchEvents(ctx context.Context) {
	a.events.Watch(ctx, events.Source{Usage: a.spool.Usage, Hosts: a.disp.Hosts})
}

// handoffEnded reports the end of the hand-off (res, or its error) as an
// event, and hands that event off too: the dispatcher has stopped, so it
// is delivered by the hookpace that took the rest. If that fails, it
// stays in the spool for the next start, as any webhook left does.
func (a *app) handoffEnded(ctx context.Context, sh config.ShutdownConfig, res handoff.Result, err error) {
	if a.events == nil {
		return
	}
	data := map[string]any{"target": redacted(sh.Handoff), "queued": res.Queued, "handed_off": res.HandedOff,
		"left": res.Left, "took_ms": res.Took.Milliseconds(), "kept": res.Kept}
	if err != nil {
		data["error"] = err.Error()
	}
	a.events.Emit(deliver.Event{Type: events.HandoffEnded, At: time.Now(), Data: data})
	a.events.Flush()
	host := a.current.Load().Events.Host
	files := a.files.Load()
	from, _ := os.Hostname()
	r, err := handoff.Run(ctx, handoff.Options{Target: sh.Handoff, Auth: files.HandoffAuth, Secret: files.HandoffSecret, From: from,
		Queue: oneHost{a.spool, host}, Logger: a.log})
	if err != nil || r.Left > 0 {
		a.log.Warn("handoff: the handoff.ended event stays in the spool", "host", host, "left", r.Left, "error", err)
	}
}

// oneHost is the spool as a hand-off of one host's queue sees it.
type oneHost struct {
	*spool.Spool
	host string
}

func (q oneHost) Hosts() map[string]spool.HostUsage {
	u := q.HostUsage(q.host)
	if u.Messages == 0 {
		return nil
	}
	return map[string]spool.HostUsage{q.host: u}
}
