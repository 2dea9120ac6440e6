package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/hookpace/hookpace/admin"
	"github.com/hookpace/hookpace/spool"
)

// showMessage prints the webhook id as c's replica knows it, following
// the fleet: an id of another replica's spool is asked of that replica
// (when the fleet knows its admin address and it is live), and a webhook
// handed off is followed to the replica it went to, a hop each at most.
func showMessage(ctx context.Context, out io.Writer, c *admin.Client, id string, asJSON bool) error {
	m, err := c.Message(ctx, id)
	var nh *admin.NotHereError
	if errors.As(err, &nh) {
		el := nh.NotHere.Elsewhere
		if !reachable(el) {
			return err
		}
		if m, err = c.At(el.Admin).Message(ctx, id); err != nil {
			return fmt.Errorf("%s; asking it: %w", nh.NotHere.Error, err)
		}
		if !asJSON {
			fmt.Fprintf(out, "(from replica %s at %s, whose spool accepted it)\n", el.Replica, el.Admin)
		}
	} else if err != nil {
		return err
	}
	if asJSON {
		return printJSON(out, m)
	}
	printMessage(out, m)
	if err := printCopies(ctx, out, c, m); err != nil {
		return err
	}
	el := m.HandedOff
	if el == nil {
		return nil
	}
	fmt.Fprintf(out, "handed off to hookpace at %s as %s", el.To, el.ID)
	if el.Replica != "" {
		fmt.Fprintf(out, " (replica %s, admin API at %s)", el.Replica, el.Admin)
	}
	fmt.Fprintln(out)
	if !reachable(el) || el.ID == "" {
		return nil
	}
	there, err := c.At(el.Admin).Message(ctx, el.ID)
	if err != nil {
		fmt.Fprintf(out, "asking it: %v\n", err)
		return nil
	}
	fmt.Fprintf(out, "\nthere:\n")
	printMessage(out, there)
	return nil
}

// reachable reports whether el names a live replica whose admin address
// can be dialled from elsewhere (not 0.0.0.0 or [::]).
func reachable(el *admin.Elsewhere) bool {
	if el == nil || !el.Live || el.Admin == "" {
		return false
	}
	host, _, err := net.SplitHostPort(el.Admin)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host != "" && (ip == nil || !ip.IsUnspecified())
}

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
