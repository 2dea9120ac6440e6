package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hookpace/hookpace/admin"
	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/deliver"
	"github.com/hookpace/hookpace/replicate"
)

// adminFlags adds --admin, --config and --token-file to fs and returns a
// function that builds the client once fs is parsed. The config file is
// --config, else $HOOKPACE_CONFIG; it gives the admin address and the
// token file unless the flags do.
func adminFlags(fs *flag.FlagSet) func() (*admin.Client, error) {
	addr := fs.String("admin", "", "admin API address (host:port)")
	path := fs.String("config", "", "config file to read the admin address and token file from")
	tokenFile := fs.String("token-file", "", "file holding the admin API token")
	return func() (*admin.Client, error) {
		p := *path
		if p == "" {
			p = os.Getenv("HOOKPACE_CONFIG")
		}
		a, tf := *addr, *tokenFile
		if p != "" && (a == "" || tf == "") {
			cfg, err := loadConfig(p)
			if err != nil {
				return nil, err
			}
			if a == "" {
				a = cfg.Admin
			}
			if tf == "" {
				tf = cfg.AdminAccess.TokenFile
			}
		}
		if a == "" {
			a = config.Default().Admin
		}
		c := admin.NewClient(a)
		if tf != "" {
			token, err := config.ReadToken(tf)
			if err != nil {
				return nil, fmt.Errorf("admin token: %w", err)
			}
			c.WithToken(token)
		}
		return c, nil
	}
}

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

// health exits 0 if the admin API answers /healthz (--ready: /readyz); for
// container probes, which run inside the pod where the admin API listens.
func health(args []string, out io.Writer) error {
	fs := newFlags("health")
	client := adminFlags(fs)
	ready := fs.Bool("ready", false, "check /readyz instead of /healthz")
	if err := parse(fs, args); err != nil {
		return err
	}
	c, err := client()
	if err != nil {
		return err
	}
	if err := c.Health(context.Background(), *ready); err != nil {
		return err
	}
	fmt.Fprintln(out, "ok")
	return nil
}

func pauseResume(cmd string, args []string, out io.Writer) error {
	fs := newFlags(cmd)
	client := adminFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{"hookpace " + cmd + " HOST"}
	}
	c, err := client()
	if err != nil {
		return err
	}
	host := strings.ToLower(fs.Arg(0))
	var st deliver.HostStatus
	if cmd == "pause" {
		st, err = c.Pause(context.Background(), host)
	} else {
		st, err = c.Resume(context.Background(), host)
	}
	if err != nil {
		return err
	}
	if st.Host != "" { // the admin API's form of it: a URL becomes its host
		host = st.Host
	}
	fmt.Fprintf(out, "%s: %sd\n", host, cmd)
	return nil
}

func dead(args []string, out io.Writer) error {
	if len(args) == 0 {
		return usageError{"hookpace dead list|export|replay|purge"}
	}
	sub, args := args[0], args[1:]
	fs := newFlags("dead " + sub)
	client := adminFlags(fs)
	host := fs.String("host", "", "only this host's dead letters")
	all := fs.Bool("all", false, "every dead letter")
	limit := fs.Int("limit", 100, "list at most this many (0: all)")
	asJSON := fs.Bool("json", false, "print JSON")
	since := fs.String("since", "", "only those that died at or after this (RFC 3339, or a duration ago: 1h)")
	until := fs.String("until", "", "only those that died before this (RFC 3339, or a duration ago)")
	if err := parse(fs, args); err != nil {
		return err
	}
	c, err := client()
	if err != nil {
		return err
	}
	sel := admin.Selector{All: *all, Host: strings.ToLower(*host), IDs: fs.Args(), Since: *since, Until: *until}
	ctx := context.Background()
	switch sub {
	case "export":
		return exportDead(ctx, c, sel, out)
	case "list":
		list, err := c.Dead(ctx, sel, *limit)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, list)
		}
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tHOST\tATTEMPTS\tSTATUS\tDIED\tREASON\tURL")
		for _, d := range list.Dead {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n", d.ID, d.Host, d.Attempts, d.Status,
				d.DiedAt.Local().Format(time.DateTime), d.Reason, d.URL)
		}
		tw.Flush()
		fmt.Fprintf(out, "%d dead letters", list.Total)
		if list.Total > len(list.Dead) {
			fmt.Fprintf(out, " (%d shown)", len(list.Dead))
		}
		fmt.Fprintln(out)
		return nil
	case "replay", "purge":
		if !sel.All && sel.Host == "" && len(sel.IDs) == 0 && sel.Since == "" && sel.Until == "" {
			return usageError{"say which: --all, --host HOST, --since/--until or IDs"}
		}
		if sub == "replay" {
			res, err := c.ReplayDead(ctx, sel)
			if err != nil {
				return err
			}
			if *asJSON {
				return printJSON(out, res)
			}
			fmt.Fprintf(out, "replayed %d dead letters\n", res.Replayed)
			for _, h := range res.Hosts {
				fmt.Fprintf(out, "%s: %s\n", h.Host, h.Next)
			}
			return nil
		}
		n, err := c.PurgeDead(ctx, sel)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "purged %d dead letters\n", n)
		return nil
	default:
		return usageError{"unknown dead subcommand " + sub}
	}
}

func printJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
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
