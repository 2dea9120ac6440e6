package cli

import (
	"fmt"
	"io"
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
