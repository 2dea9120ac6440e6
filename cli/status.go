package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hookpace/hookpace/admin"
	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/replicate"
)

// status is hookpace status: which hookpace answered, its spool, its
// replication and fleet, and a row per host; with --fleet the fleet's
// hosts instead.
func status(args []string, out io.Writer) error {
	fs := newFlags("status")
	client := adminFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	filter := fs.String("host", "", "only the hosts whose name contains this")
	fleetView := fs.Bool("fleet", false, "the whole fleet's hosts, merged over its live replicas")
	if err := parse(fs, args); err != nil {
		return err
	}
	c, err := client()
	if err != nil {
		return err
	}
	ctx := context.Background()
	if *fleetView {
		return statusFleet(ctx, c, *asJSON, out)
	}
	sp, err := c.Spool(ctx)
	if err != nil {
		return err
	}
	hosts, fl, err := c.HostsMatching(ctx, *filter)
	if err != nil {
		return err
	}
	inst, instErr := c.Instance(ctx) // an older hookpace has no /v1/instance
	if *asJSON {
		body := map[string]any{"spool": sp, "hosts": hosts}
		if fl != nil {
			body["fleet"] = fl
		}
		if instErr == nil {
			body["instance"] = inst
		}
		return printJSON(out, body)
	}
	if instErr == nil {
		printInstance(out, c.Base(), inst)
	}
	accepting := "accepting"
	if !sp.Accepting {
		accepting = "REFUSING (past high-water mark)"
	}
	fmt.Fprintf(out, "spool: %d messages, %s, %.1f%% of limit, %s; %d dead letters; draining %.1f/s\n\n",
		sp.Messages, admin.BytesText(sp.Bytes), 100*sp.Fraction, accepting, sp.Dead, sp.DrainRate)
	if r := sp.Replication; r != nil {
		printReplication(out, r)
	}
	if fl != nil {
		fmt.Fprintf(out, "fleet %s: replica %s, %d live replicas\n", fl.State, fl.Replica, fl.Live)
		if fl.Error != "" {
			fmt.Fprintf(out, "  redis: %s\n", fl.Error)
		}
		fmt.Fprintln(out)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tQUEUED\tIN FLIGHT\tRATE\tHELD UNTIL\tBREAKER\tLAST ERROR")
	now := time.Now()
	for _, h := range hosts {
		printHostRow(tw, h, now)
	}
	return tw.Flush()
}

// printHostRow prints one row of hookpace status's table of hosts.
func printHostRow(tw io.Writer, h deliver.HostStatus, now time.Time) {
	rate := fmt.Sprintf("%s/s", admin.RateText(h.Rate))
	if h.Rate < h.ConfiguredRate {
		rate = fmt.Sprintf("%s/s (of %s)", admin.RateText(h.Rate), admin.RateText(h.ConfiguredRate))
	}
	if h.Learned != "" {
		rate += ", " + h.Learned
	}
	if h.RateWhy != "" {
		rate += ", " + h.RateWhy
	}
	if h.Batch != nil {
		rate += ", " + h.Batch.Text()
	}
	if t := h.Lanes.Text(); t != "" {
		rate += ", " + t
	}
	held := "-"
	switch {
	case h.Paused && h.PausedWhy != "" && h.PausedWhy != deliver.PausedByOperator:
		held = "paused: " + h.PausedWhy
	case h.Paused:
		held = "paused"
	case h.HeldUntil != nil:
		held = fmt.Sprintf("%s (%s, %s)", h.HeldUntil.Local().Format("15:04:05"),
			h.HeldUntil.Sub(now).Round(100*time.Millisecond), h.HoldReason)
	}
	lastErr := h.LastError
	if lastErr == "" {
		lastErr = "-"
	}
	inFlight := strconv.Itoa(h.InFlight)
	if h.FleetInFlight != nil {
		inFlight += fmt.Sprintf(" (fleet %d)", *h.FleetInFlight)
	}
	if h.ConcurrencyWhy != "" {
		inFlight += " of " + h.ConcurrencyWhy
	}
	if h.WaitingForSlot {
		inFlight += " (waiting for a slot: delivery.max_in_flight)"
	}
	breaker := h.Breaker
	if h.BreakerProbeAt != nil {
		breaker = fmt.Sprintf("%s (probe %s)", h.Breaker, h.BreakerProbeAt.Local().Format("15:04:05"))
	}
	fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", h.Host, h.Queued, inFlight, rate, held, breaker, lastErr)
}

// printReplication prints the spool's replication state: whether a 202
// now means a copy off this node.
func printReplication(out io.Writer, r *replicate.Status) {
	state := "reachable"
	if !r.Reachable {
		state = "UNREACHABLE: webhooks are refused (on_unavailable: refuse)"
		if r.OnUnavailable == "local" {
			state = "UNREACHABLE: webhooks are acknowledged on the local spool alone (on_unavailable: local)"
		}
	}
	fmt.Fprintf(out, "replication: stream %s (R%d), replica %s, epoch %d, %s\n", r.Stream, r.Replicas, r.Replica, r.Epoch, state)
	fmt.Fprintf(out, "  published %d, deleted %d, deletes pending %d, failed rounds %d, local only %d\n",
		r.Published, r.Removed, r.Lag, r.FailedRounds, r.LocalOnly)
	if r.LeaseLost {
		fmt.Fprintf(out, "  LEASE LOST: another replica adopted this one's queue while it ran; restart hookpace to drop what it adopted\n")
	}
	fmt.Fprintf(out, "  leases %s; adopting %d now; %d adoptions, %d webhooks adopted\n\n",
		strings.Join(r.Leases, ", "), len(r.Adopting), r.Adoptions, r.Adopted)
}

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

// printInstance says which hookpace answered (another instance's admin
// API may listen on the address tried) and what came through its proxy.
func printInstance(out io.Writer, base string, in admin.Instance) {
	fmt.Fprintf(out, "instance: %s (pid %d), spool %s, started %s (up %s)", base, in.PID, in.SpoolDir,
		in.StartedAt.UTC().Format("2006-01-02 15:04:05 UTC"), time.Since(in.StartedAt).Round(time.Second))
	if in.Config != "" {
		fmt.Fprintf(out, ", config %s", in.Config)
	}
	fmt.Fprintln(out)
	printHTTPS(out, in.HTTPS)
	var total int64
	for _, n := range in.Ingest {
		total += n
	}
	if total == 0 {
		fmt.Fprintf(out, "through hookpace since the start: nothing (is the app's HTTP_PROXY http://%s, and does its client use it?)\n", in.Listen)
		return
	}
	spooled, pass := in.Ingest["accepted"], in.Ingest["passthrough"]
	fmt.Fprintf(out, "through hookpace since the start: %d requests: %d spooled, %d passthrough, %d other (refused, 429, duplicate...)\n",
		total, spooled, pass, total-spooled-pass)
}

// printHTTPS says which CA intercepts which hosts, and lists the HTTPS
// destinations that went around the pacing.
func printHTTPS(out io.Writer, h *admin.HTTPS) {
	if h == nil {
		return
	}
	switch {
	case h.Open:
		fmt.Fprintf(out, "https: hookpace's open-world CA intercepts any partner name, never an IP address nor %s; apps trust %s\n",
			strings.Join(h.Excluded, ", "), h.Bundle)
	case h.CA == "own":
		fmt.Fprintf(out, "https: hookpace's CA intercepts %s; apps trust %s\n", strings.Join(h.Names, ", "), h.Bundle)
	case h.CA == "operator":
		fmt.Fprintf(out, "https: your CA %s intercepts hosts whose connect is mitm; apps trust %s\n", h.CACert, h.Bundle)
	default:
		fmt.Fprintln(out, "https: no host is intercepted (name partners under hosts: to pace their https:// webhooks)")
	}
	if h.Notice != "" {
		fmt.Fprintf(out, "  %s\n", h.Notice)
	}
	if len(h.Uncovered) > 0 {
		fmt.Fprintf(out, "  the CA cannot vouch for %s: passed through unpaced\n", strings.Join(h.Uncovered, ", "))
	}
	for _, t := range h.Tunnels {
		switch t.Mode {
		case "passthrough":
			fmt.Fprintf(out, "  passed through unpaced: %s (%d tunnels; %s)\n", t.Host, t.Count, t.Reason)
		case "refused":
			fmt.Fprintf(out, "  refused: %s (%d tunnels; %s)\n", t.Host, t.Count, t.Reason)
		case "rejected":
			fmt.Fprintf(out, "  rejected by the client: %s (%d handshakes; %s)\n", t.Host, t.Count, t.Reason)
		}
	}
	for _, f := range h.Forwarded {
		fmt.Fprintf(out, "  forwarded as API calls (not webhooks): %s (%d requests)\n", f.Host, f.Count)
	}
}
