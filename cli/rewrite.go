package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/hookpace/hookpace/config"
)

// printRewrites writes one line per host (defaults first) whose rewrite
// rules are on: what check-config says leaves for each partner.
func printRewrites(out io.Writer, cfg *config.Config) {
	line := func(name string, rw config.Rewrite) {
		if d := rw.String(); d != "" {
			fmt.Fprintf(out, "rewrite %s: %s\n", name, d)
		}
	}
	line("defaults", cfg.Defaults.Rewrite)
	for _, k := range slices.Sorted(maps.Keys(cfg.Hosts)) {
		line(k, cfg.Hosts[k].Rewrite)
	}
}
