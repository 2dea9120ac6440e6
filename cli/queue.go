package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hookpace/hookpace/admin"
)

func init() {
	commandHelp["queue"] = `Usage: hookpace queue list --host H [--limit N] [--json]
       hookpace queue purge --host H [--older-than D] [ID...]
       hookpace queue bury --host H [--older-than D] [ID...]

A host's backlog.

  queue list    the host's queue, oldest first, with ages and attempts.
  queue purge   drops the host's queued webhooks for good: all, those
                older than D (like 1h), or the IDs given. Webhooks the
                deliverer holds in memory go too; one being sent at that
                moment is dropped when its attempt fails (a success
                stands). It asks no question: it prints what it did.
  queue bury    moves them to the dead letters instead (hookpace dead
                replay brings them back).

Each purge and burial is logged with who asked and how many it touched,
and the journal keeps each webhook as purged (or dead).
`
}

func queueCmd(args []string, out io.Writer) error {
	if len(args) == 0 {
		return usageError{"hookpace queue list|purge|bury --host H"}
	}
	sub, args := args[0], args[1:]
	fs := newFlags("queue " + sub)
	client := adminFlags(fs)
	host := fs.String("host", "", "the host (host or host:port, as in hookpace status)")
	limit := fs.Int("limit", 100, "list at most this many (1 to 10000, oldest first)")
	olderThan := fs.Duration("older-than", 0, "only webhooks queued longer ago than this")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *host == "" {
		return usageError{"which host? --host H"}
	}
	c, err := client()
	if err != nil {
		return err
	}
	ctx := context.Background()
	switch sub {
	case "list":
		list, err := c.Queue(ctx, *host, *limit)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, list)
		}
		printQueue(out, list)
		return nil
	case "purge", "bury":
		done, inFlight, err := c.QueueAction(ctx, sub == "bury", *host, *olderThan, fs.Args(), asker())
		if err != nil {
			return err
		}
		verb := map[string]string{"purge": "purged", "bury": "buried"}[sub]
		fmt.Fprintf(out, "%s %d queued webhooks of %s\n", verb, done, *host)
		if inFlight > 0 {
			fmt.Fprintf(out, "%d were being sent: %s when their attempt fails (a success stands)\n", inFlight, verb)
		}
		return nil
	default:
		return usageError{"unknown queue subcommand " + sub}
	}
}

func printQueue(out io.Writer, list admin.QueueList) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tID\tAGE\tATTEMPTS\tLAST\tURL")
	for _, m := range list.Messages {
		last := ""
		if m.LastStatus != 0 || m.LastError != "" {
			last = strings.TrimSpace(fmt.Sprintf("%d %s", m.LastStatus, m.LastError))
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\n", m.Position, m.ID, (time.Duration(m.AgeMS) * time.Millisecond).String(), m.Attempts, last, m.URL)
	}
	tw.Flush()
	fmt.Fprintf(out, "%d queued for %s", list.Queued, list.Host)
	if int(list.Queued) > len(list.Messages) {
		fmt.Fprintf(out, " (%d shown)", len(list.Messages))
	}
	fmt.Fprintln(out)
}

// asker is who runs the command, for hookpace's log: user@machine.
func asker() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	h, _ := os.Hostname()
	return name + "@" + h
}
