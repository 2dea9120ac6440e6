package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/hookpace/hookpace/admin"
	"github.com/hookpace/hookpace/spool"
)

// maxCopies bounds the copies msg show lists: a route has a few targets.
const maxCopies = 100

// printCopies lists the copies of the webhook m is one of, when an
// inbound route fanned it out to several targets: each target's copy,
// found in the journal by the door's webhook id they share, with its
// state.
func printCopies(ctx context.Context, out io.Writer, c *admin.Client, m admin.Message) error {
	h := http.Header(m.Header)
	wh := h.Get(spool.HeaderDoorWebhook)
	if wh == "" {
		return nil
	}
	list, err := c.Messages(ctx, admin.MessageFilter{Contains: wh, Limit: maxCopies})
	if err != nil {
		return fmt.Errorf("the copies of inbound webhook %s: %w", wh, err)
	}
	fmt.Fprintf(out, "inbound   webhook %s of route %s, one copy per target:\n", wh, h.Get(spool.HeaderDoor))
	for _, l := range list.Messages {
		s, err := c.Message(ctx, l.ID) // a listing has no headers
		if err != nil {
			return fmt.Errorf("copy %s of inbound webhook %s: %w", l.ID, wh, err)
		}
		sh := http.Header(s.Header)
		if sh.Get(spool.HeaderDoorWebhook) != wh {
			continue // the id in its body or another header, not its mark
		}
		this := ""
		if s.ID == m.ID {
			this = "  (this one)"
		}
		reason := ""
		if s.Reason != "" {
			reason = "  " + s.Reason
		}
		fmt.Fprintf(out, "  %s  target %s  %s  %s%s%s\n", s.ID, sh.Get(spool.HeaderDoorTarget), s.Host, s.State, reason, this)
	}
	return nil
}
