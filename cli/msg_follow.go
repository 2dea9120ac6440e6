package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/hookpace/hookpace/admin"
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
