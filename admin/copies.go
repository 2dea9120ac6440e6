package admin

import (
	"net/http"

	"github.com/hookpace/hookpace/spool"
)

// maxCopies bounds the copies a webhook's page lists: a route has a few
// targets.
const maxCopies = 100

// inboundCopy is one target's copy of a webhook an inbound route fanned
// out, as a copy's page lists it.
type inboundCopy struct {
	Webhook, Target, ID, Host, State, Reason string
	This                                     bool
}

// inboundCopies are the copies of the webhook that e (whose id is id) is
// one of, found in the journal by the door's webhook id they share; nil
// for a webhook no route fanned out.
func (a *api) inboundCopies(j Journal, e *spool.Entry, id string) []inboundCopy {
	wh := http.Header(e.Header).Get(spool.HeaderDoorWebhook)
	if wh == "" {
		return nil
	}
	entries, _, err := j.List(spool.Query{Contains: wh, Limit: maxCopies})
	if err != nil {
		return nil
	}
	var out []inboundCopy
	for _, le := range entries {
		v, err := j.Lookup(spool.Ref{Spool: j.Instance(), Seq: le.ID}) // a listing has no headers
		if err != nil {
			continue
		}
		h := http.Header(v.Entry.Header)
		if h.Get(spool.HeaderDoorWebhook) != wh {
			continue // the id in its body or another header, not its mark
		}
		m := a.messageOf(j, &v.Entry, v.State)
		out = append(out, inboundCopy{Webhook: wh, Target: h.Get(spool.HeaderDoorTarget), ID: m.ID, Host: m.Host,
			State: m.State, Reason: m.Reason, This: m.ID == id})
	}
	return out
}
