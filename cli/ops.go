package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hookpace/hookpace/admin"
	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/deliver"
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

// exportDead writes the selected dead letters (all of them when none is
// named) as JSON lines: one object per dead letter with its whole URL,
// stored headers and body (body_base64 when the body is not UTF-8), so that
// an operator can keep them before a volume goes away. Nothing else is
// written to out: it is meant for a file or a pipe.
func exportDead(ctx context.Context, c *admin.Client, sel admin.Selector, out io.Writer) error {
	list, err := c.ExportDead(ctx, sel)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, d := range list.Dead {
		if err := enc.Encode(d); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write dead letters: %w", err)
	}
	return nil
}

func printJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
