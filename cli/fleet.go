package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/hookpace/hookpace/admin"
)

// statusFleet prints the fleet's view (hookpace status --fleet): one row
// per host with the totals over the live replicas, and which replica
// holds what.
func statusFleet(ctx context.Context, c *admin.Client, asJSON bool, out io.Writer) error {
	hosts, first, err := c.FleetHosts(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(out, map[string]any{"replicas": first.Replicas, "state_lost": first.Lost, "hosts": hosts})
	}
	fmt.Fprintf(out, "fleet: %d live replicas (%s)\n", len(first.Replicas), strings.Join(first.Replicas, ", "))
	for _, l := range first.Lost {
		fmt.Fprintf(out, "  redis lost hosts' state: %s found it %d times, last at %s, and restored what it remembered\n",
			l.Replica, l.Times, l.Last.Local().Format("2006-01-02 15:04:05"))
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tQUEUED\tIN FLIGHT\tDELIVERED\tDEAD\tSTATE\tBY REPLICA (queued/in flight)")
	for _, h := range hosts {
		state := "-"
		switch {
		case h.Paused:
			state = "paused"
		case h.Held != "":
			state = "held (" + h.Held + ")"
		case h.Breaker != "":
			state = "breaker " + h.Breaker
		}
		parts := make([]string, 0, len(h.Replicas))
		for _, r := range h.Replicas {
			parts = append(parts, fmt.Sprintf("%s %d/%d", r.Replica, r.Queued, r.InFlight))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\n", h.Host, h.Queued, h.InFlight, h.Delivered, h.Dead,
			state, strings.Join(parts, ", "))
	}
	if len(hosts) == 0 {
		fmt.Fprintln(tw, "(no host with anything queued, in flight, held, paused, dead or delivered lately)\t\t\t\t\t\t")
	}
	return tw.Flush()
}
