package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hookpace/hookpace/journal"
	"github.com/hookpace/hookpace/spool"
)

// A webhook's id names the spool that accepted it, so
// GET /v1/messages/{id} can say where to look for one this replica does
// not hold: a webhook handed off to this replica (it keeps its id) is
// found in its journal; one of another replica's spool gets a 404 that
// names that replica and its admin address, from the fleet's list in
// Redis (fleet/spools.go); one that this replica handed off says where it
// went, under which id, and which replica that is.

// Elsewhere says where a webhook is, when it is not here.
type Elsewhere struct {
	Spool   string     `json:"spool"`             // the spool part of its id
	Replica string     `json:"replica,omitempty"` // whose spool that is, if the fleet knows
	Admin   string     `json:"admin,omitempty"`   // that replica's admin API, as it listens
	Live    bool       `json:"live"`              // that replica's heartbeat has not expired
	SeenAt  *time.Time `json:"seen_at,omitempty"` // when it last said it was there
	// A hand-off: the hookpace it went to (its proxy listener) and the id
	// it got there.
	To string `json:"to,omitempty"`
	ID string `json:"id,omitempty"`
}

// NotHere is the 404 of GET /v1/messages/{id} for an id of another spool.
type NotHere struct {
	Error     string     `json:"error"`
	ID        string     `json:"id"`
	Elsewhere *Elsewhere `json:"elsewhere"`
}

// handedInScan bounds the journal entries read, newest first, to find a
// webhook handed off to this replica by its id of another spool.
const handedInScan = 20_000

// notHere answers for ref, an id of another spool than this replica's:
// the handed-in webhook if this journal has it (200), else a 404 that
// says which replica to ask.
func (a *api) notHere(w http.ResponseWriter, r *http.Request, ref spool.Ref) {
	j := a.Journal
	if e, err := handedIn(j, ref); err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	} else if e != nil {
		v, err := j.Lookup(spool.Ref{Seq: e.ID})
		if err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		a.writeMessage(w, r, v)
		return
	}
	el := &Elsewhere{Spool: spool.IDString(ref.Spool)}
	msg := fmt.Sprintf("%s was accepted by another hookpace (spool %s)", ref, el.Spool)
	if a.Fleet != nil {
		msg = a.owner(r.Context(), ref.Spool, el, msg)
	} else {
		msg += ": this hookpace is not in a fleet, so it does not know which"
	}
	writeJSON(w, http.StatusNotFound, NotHere{Error: msg, ID: ref.String(), Elsewhere: el})
}

// owner fills el with what the fleet knows of spool's replica and returns
// msg with where to ask.
func (a *api) owner(ctx context.Context, sp uint64, el *Elsewhere, msg string) string {
	o, ok, err := a.Fleet.SpoolOwner(ctx, sp)
	switch {
	case err != nil && !ok:
		return msg + "; the fleet did not answer which replica that is: " + err.Error()
	case !ok:
		return msg + ": no replica of this fleet published that spool (another fleet, or it has not been seen for 30 days)"
	}
	el.Replica, el.Admin, el.Live = o.Replica, o.Admin, o.Live
	if !o.SeenAt.IsZero() {
		el.SeenAt = &o.SeenAt
	}
	msg = fmt.Sprintf("%s, replica %s", msg, o.Replica)
	if o.Admin != "" {
		msg += " (admin API at " + o.Admin + ")"
	}
	if o.Live {
		return msg + ": ask it"
	}
	return msg + fmt.Sprintf(", not live (last seen %s): if it stopped, it handed its queue off to another replica, "+
		"which keeps the id; if it comes back on its volume, ask it", o.SeenAt.Format(time.RFC3339))
}

// handedIn finds, among the newest handedInScan entries of j, the webhook
// handed off to this replica under ref (its id at the spool that first
// accepted it); nil if none.
func handedIn(j Journal, ref spool.Ref) (*journal.Entry, error) {
	var before journal.Cursor
	for read := 0; read < handedInScan; {
		entries, next, err := j.List(journal.Query{Before: before, Limit: 1000})
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if e.OriginSpool == ref.Spool && e.Origin == ref.Seq {
				return e, nil
			}
		}
		read += len(entries)
		if next.IsZero() || len(entries) == 0 {
			return nil, nil
		}
		before = next
	}
	return nil, nil
}

// handedOff says where a webhook this replica handed off went: the reason
// the hand-off journaled ("hookpace at HOST as ID"), with the replica that
// holds that id's spool, if the fleet knows it.
func (a *api) handedOff(ctx context.Context, reason string) *Elsewhere {
	rest, ok := strings.CutPrefix(reason, "hookpace at ")
	if !ok {
		return nil
	}
	to, id, _ := strings.Cut(rest, " as ")
	el := &Elsewhere{To: to, ID: id}
	ref, err := spool.ParseRef(id)
	if err != nil || ref.Spool == 0 {
		return el
	}
	el.Spool = spool.IDString(ref.Spool)
	if a.Fleet != nil {
		a.owner(ctx, ref.Spool, el, "")
	}
	return el
}

// isNotFound reports whether err is the journal's "no such webhook".
func isNotFound(err error) bool { return errors.Is(err, journal.ErrNotFound) }
