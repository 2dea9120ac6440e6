package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hookpace/hookpace/admin"
)

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
