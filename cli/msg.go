package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hookpace/hookpace/admin"
)

func init() {
	commandHelp["msg"] = `Usage: hookpace msg show ID [--json]
       hookpace msg list [--host H] [--state S] [--since T] [--until T]
                         [--idempotency-key KEY] [--contains TEXT] [--limit N] [--cursor C] [--json]
       hookpace msg resend ID

Where is a webhook, and what did the partner answer? From the journal,
which keeps every webhook with its attempts for journal.retain (default
14 days).

  msg show   one webhook by its id (the X-Hookpace-Id of the app's 202, or
             its last 16 digits): state (queued at position N, held,
             in_flight, delivered, dead, purged, handed_off), its keys
             (idempotency; coalesce, with how often its content was
             replaced), its lane (fairness key, priority, ordering key,
             not before), the request's headers as the app sent them
             (secret values redacted), and each attempt with its
             status, error and the start of the answer.
             A dead letter replayed, or a webhook resent, stays one
             webhook under the id the app got: msg show says its
             current state and every attempt of it, in order.
             In a fleet, an id of another replica's spool is asked of
             that replica's admin API when the fleet knows it and it is
             live (with the same token), and a webhook handed off is
             followed to the replica it went to; otherwise msg show says
             which replica to ask.
  msg list   webhooks newest first; --state one of the states above;
             --since and --until an RFC 3339 time or a duration ago (1h).
             --idempotency-key KEY: only the webhooks the app sent with
             that Idempotency-Key (matched whole). --contains TEXT: only
             those whose request holds TEXT (case-sensitive) in what is
             still kept of it: the URL (query values redacted), the
             headers (secret values redacted), and the body while it is
             queued or dead, or once delivered with journal.bodies on.
             Newest accepted first, from the journal's indexes (by
             state, host, time and Idempotency-Key). A page ends with
             the --cursor of the next; a page reads for at most about
             50 ms (200,000 entries), so a --contains search over a big
             journal may return fewer than --limit, or none, with a
             cursor to go on from.
  msg resend a delivered webhook again, from the request the journal kept
             (journal.bodies: true when it was delivered): queued at the
             tail of its host's queue and delivered under its first id.
`
}

func msgCmd(args []string, out io.Writer) error {
	if len(args) == 0 {
		return usageError{"hookpace msg show ID | msg list | msg resend ID"}
	}
	sub, args := args[0], args[1:]
	fs := newFlags("msg " + sub)
	client := adminFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	var f admin.MessageFilter
	if sub == "list" {
		fs.StringVar(&f.Host, "host", "", "only this host's webhooks")
		fs.StringVar(&f.State, "state", "", "only in this state")
		fs.StringVar(&f.Since, "since", "", "accepted at or after (RFC 3339, or a duration ago)")
		fs.StringVar(&f.Until, "until", "", "accepted before (RFC 3339, or a duration ago)")
		fs.StringVar(&f.Cursor, "cursor", "", "the next page, as the last one said")
		fs.StringVar(&f.Idempotency, "idempotency-key", "", "only the webhooks with this Idempotency-Key")
		fs.StringVar(&f.Contains, "contains", "", "only those whose request (URL, headers, body as kept) holds this text")
		fs.IntVar(&f.Limit, "limit", 50, "at most this many (0: all, page by page)")
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	c, err := client()
	if err != nil {
		return err
	}
	ctx := context.Background()
	switch sub {
	case "show":
		if fs.NArg() != 1 {
			return usageError{"hookpace msg show ID"}
		}
		return showMessage(ctx, out, c, fs.Arg(0), *asJSON)
	case "resend":
		if fs.NArg() != 1 {
			return usageError{"hookpace msg resend ID"}
		}
		res, err := c.Resend(ctx, fs.Arg(0), asker())
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, res)
		}
		fmt.Fprintf(out, "%s: queued again for %s (as %s), delivered under its first id\n", res.ID, res.Host, res.Queued)
		if res.Next != "" {
			fmt.Fprintf(out, "%s: %s\n", res.Host, res.Next)
		}
		return nil
	case "list":
		f.Host = strings.ToLower(f.Host)
		list, err := listMessages(ctx, c, f)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, list)
		}
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tHOST\tSTATE\tACCEPTED\tREASON\tURL")
		for _, m := range list.Messages {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, m.Host, m.State, m.AcceptedAt.Local().Format(time.DateTime), m.Reason, m.URL)
		}
		tw.Flush()
		if list.Cursor != "" {
			fmt.Fprintf(out, "more: --cursor %s\n", list.Cursor)
		}
		return nil
	default:
		return usageError{"unknown msg subcommand " + sub}
	}
}

// replacedText says how often later webhooks with m's coalesce key
// replaced its content: " (replaced 2 times, last at T)", or "".
func replacedText(m admin.Message) string {
	if m.Replaced == 0 {
		return ""
	}
	times := "times"
	if m.Replaced == 1 {
		times = "time"
	}
	last := ""
	if m.ReplacedAt != nil {
		last = ", last at " + m.ReplacedAt.Local().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf(" (content replaced %d %s%s)", m.Replaced, times, last)
}

// laneText is m's lane: "fairness key K, priority high, ordering key O,
// not before T", leaving out what it has not.
func laneText(m admin.Message) string {
	var parts []string
	if m.Fairness != "" {
		parts = append(parts, "fairness key "+m.Fairness)
	}
	if m.Priority != "" {
		parts = append(parts, "priority "+m.Priority)
	}
	if m.Ordering != "" {
		parts = append(parts, "ordering key "+m.Ordering)
	}
	if m.NotBefore != nil {
		parts = append(parts, "not before "+m.NotBefore.Local().Format(time.RFC3339Nano))
	}
	if len(parts) == 0 {
		return "default"
	}
	return strings.Join(parts, ", ")
}

// printHeaders prints the request's headers as the journal kept them
// (secret values redacted), sorted by name.
func printHeaders(out io.Writer, h map[string][]string) {
	if len(h) == 0 {
		return
	}
	fmt.Fprintln(out, "headers")
	for _, k := range slices.Sorted(maps.Keys(h)) {
		fmt.Fprintf(out, "  %s: %s\n", k, strings.Join(h[k], ", "))
	}
}

func printMessage(out io.Writer, m admin.Message) {
	fmt.Fprintf(out, "id        %s\nhost      %s\nrequest   %s %s (%d bytes)\naccepted  %s\n", m.ID, m.Host, m.Method, m.URL, m.Bytes,
		m.AcceptedAt.Local().Format(time.RFC3339Nano))
	if m.RequeuedAt != nil {
		fmt.Fprintf(out, "requeued  %s (replayed or resent: max_age counts from then)\n", m.RequeuedAt.Local().Format(time.RFC3339Nano))
	}
	state := m.State
	if m.Position > 0 {
		state += fmt.Sprintf(" (position %d in its host's queue)", m.Position)
	}
	if m.OutcomeAt != nil {
		state += " at " + m.OutcomeAt.Local().Format(time.RFC3339Nano)
	}
	fmt.Fprintf(out, "state     %s\n", state)
	if m.Reason != "" {
		fmt.Fprintf(out, "reason    %s\n", m.Reason)
	}
	if m.Idempotency != "" {
		fmt.Fprintf(out, "key       %s\n", m.Idempotency)
	}
	if m.Coalesce != "" {
		fmt.Fprintf(out, "coalesce  %s%s\n", m.Coalesce, replacedText(m))
	}
	fmt.Fprintf(out, "lane      %s\n", laneText(m))
	printHeaders(out, m.Header)
	fmt.Fprintf(out, "attempts  %d\n", len(m.Attempts))
	for i, a := range m.Attempts {
		status := "no answer"
		if a.Status != 0 {
			status = fmt.Sprint(a.Status)
		}
		fmt.Fprintf(out, "  %d. %s  %s  %.1f ms", i+1, a.At.Local().Format(time.RFC3339Nano), status, a.DurationMS)
		if a.Batch > 1 {
			fmt.Fprintf(out, "  (batch of %d)", a.Batch)
		}
		if a.Error != "" {
			fmt.Fprintf(out, "  %s", a.Error)
		}
		fmt.Fprintln(out)
		if a.Response != "" {
			fmt.Fprintf(out, "     response: %s\n", strings.ReplaceAll(a.Response, "\n", "\n               "))
		}
	}
}

// listMessages is one page of the journal, or with Limit 0 every page,
// as --limit 0 means all in every listing command.
func listMessages(ctx context.Context, c *admin.Client, f admin.MessageFilter) (admin.MessageList, error) {
	if f.Limit != 0 {
		return c.Messages(ctx, f)
	}
	f.Limit = admin.MaxMessagesPage
	var all admin.MessageList
	for {
		page, err := c.Messages(ctx, f)
		if err != nil {
			return all, err
		}
		all.Messages = append(all.Messages, page.Messages...)
		if page.Cursor == "" || page.Cursor == f.Cursor {
			return all, nil
		}
		f.Cursor = page.Cursor
	}
}
