package cli

import (
	"fmt"
	"io"

	"github.com/hookpace/hookpace/config"
)

// printInbound prints, for check-config, each inbound route and where
// its webhooks go: each target with its host, filter and rewrite, and
// what its catch-up asks of which API.
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
		if cu := rt.CatchUp; cu != nil {
			fmt.Fprintf(out, "  catch-up: %s, every %s, looking back %s, at %s\n", catchUpWhat(cu), cu.Every, cu.Since, cu.APIURL)
		}
	}
}

// catchUpWhat is what a catch-up reads: a hook's deliveries, or events.
func catchUpWhat(cu *config.CatchUp) string {
	switch {
	case cu.Repo != "":
		return fmt.Sprintf("redelivers failed deliveries of %s's hook %d", cu.Repo, cu.HookID)
	case cu.Org != "":
		return fmt.Sprintf("redelivers failed deliveries of organisation %s's hook %d", cu.Org, cu.HookID)
	case cu.AppID != 0:
		return fmt.Sprintf("redelivers failed deliveries of GitHub App %d's hook", cu.AppID)
	}
	return "fetches Stripe events not taken, into " + cu.Path
}
