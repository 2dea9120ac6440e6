package cli

import (
	"fmt"
	"io"

	"github.com/hookpace/hookpace/config"
)

// printInbound prints, for check-config, each inbound route and where
// its webhooks go: each target with its host, filter and rewrite.
func printInbound(out io.Writer, cfg *config.Config) {
	for _, rt := range cfg.Inbound {
		fmt.Fprintf(out, "inbound %s: listen %s, %d target(s)\n", rt.Name, rt.Listen, len(rt.Targets))
		for _, t := range rt.Targets {
			name := t.Name
			if name == "" {
				name = "to"
			}
			rw := ""
			if t.Rewrite.JSON != nil || t.Rewrite.Headers != nil {
				rw = ", rewritten"
			}
			fmt.Fprintf(out, "  %s: %s (paced as %s), takes %s%s\n", name, t.URL, t.Host, t.Filter, rw)
		}
	}
}
