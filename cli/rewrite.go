package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/hookpace/hookpace/config"
)

// printRewrites writes one line per host (defaults first) whose rewrite
// rules are on: what check-config says leaves for each partner.
func printRewrites(out io.Writer, cfg *config.Config) {
	line := func(name string, rw config.Rewrite) {
		var parts []string
		if h := rw.Headers; h != nil {
			var set []string
			for _, s := range h.Set {
				set = append(set, s.Name+": "+s.Value)
			}
			if len(set) > 0 {
				parts = append(parts, "headers set "+strings.Join(set, ", "))
			}
			if len(h.Remove) > 0 {
				parts = append(parts, "headers remove "+strings.Join(h.Remove, ", "))
			}
		}
		if j := rw.JSON; j != nil {
			for _, l := range []struct {
				what string
				n    int
				at   func(int) string
			}{{"json drop ", len(j.Drop), func(i int) string { return j.Drop[i].String() }},
				{"json mask ", len(j.Mask), func(i int) string { return j.Mask[i].String() }}} {
				var ps []string
				for i := range l.n {
					ps = append(ps, l.at(i))
				}
				if len(ps) > 0 {
					parts = append(parts, l.what+strings.Join(ps, ", "))
				}
			}
		}
		if len(parts) > 0 {
			fmt.Fprintf(out, "rewrite %s: %s\n", name, strings.Join(parts, "; "))
		}
	}
	line("defaults", cfg.Defaults.Rewrite)
	for _, k := range slices.Sorted(maps.Keys(cfg.Hosts)) {
		line(k, cfg.Hosts[k].Rewrite)
	}
}
