package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/hookpace/hookpace/admin"
	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/journal"
	"github.com/hookpace/hookpace/server"
)

// checkConfig is hookpace check-config: it loads the config and every
// file it names as run would, and says what each part of it does.
func checkConfig(args []string, stdout io.Writer) error {
	fs := newFlags("check-config")
	// --config FILE as for run, or the file on its own.
	flagPath := fs.String("config", "", "config file")
	if err := parse(fs, args); err != nil {
		return err
	}
	path := fs.Arg(0)
	if *flagPath != "" {
		if path != "" && path != *flagPath {
			return usageError{"two files given: hookpace check-config FILE"}
		}
		path = *flagPath
	}
	if path == "" {
		return usageError{"which file? hookpace check-config FILE"}
	}
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	// Every file that run loads, loaded as run loads it.
	if _, err := server.LoadFiles(cfg); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: ok (%d hosts, listen %s, admin %s)\n", path, len(cfg.Hosts), cfg.Listen, cfg.Admin)
	fmt.Fprintf(stdout, "https: %s\n", describeHTTPS(cfg))
	printRewrites(stdout, cfg)
	fmt.Fprintf(stdout, "webhooks: %s\n", describeWebhooks(cfg))
	printInbound(stdout, cfg)
	fmt.Fprintf(stdout, "journal: %s\n", describeJournal(cfg))
	if w := captureUncovered(cfg); w != "" {
		fmt.Fprintf(stdout, "WARNING: %s\n", w)
	}
	for _, w := range append(cfg.PlainTokenURLs(), cfg.InboundWarnings()...) {
		fmt.Fprintf(stdout, "WARNING: %s\n", w)
	}
	return nil
}

// describeJournal says, for check-config, which of journal.max_bytes and
// journal.retain binds: the rate above which max_bytes removes entries
// before retain would, at journal.NominalEntryBytes an entry. The status
// page says which binds at the rate and size the journal measures.
func describeJournal(cfg *config.Config) string {
	j := cfg.Journal
	if j.Off {
		return "off"
	}
	maxBytes := int64(j.MaxBytes)
	if maxBytes == 0 {
		maxBytes = int64(cfg.Spool.MaxBytes) / 4
	}
	entries := maxBytes / journal.NominalEntryBytes
	rate := float64(entries) / j.Retain.D().Seconds()
	return fmt.Sprintf("max_bytes %s holds about %d entries at ~%d B each; retain %s binds below %.2f webhooks/s, max_bytes above "+
		"(the status page and /v1/spool say which binds at the measured rate)", admin.BytesText(maxBytes), entries,
		journal.NominalEntryBytes, j.Retain.D(), rate)
}

// describeWebhooks says, for check-config, which requests are webhooks
// (spooled, 202) and which are forwarded with the partner's own answer.
func describeWebhooks(cfg *config.Config) string {
	var b strings.Builder
	if cfg.WebhookRulesSet {
		b.WriteString("a request is a webhook when a rule matches it, else it is forwarded:")
		for _, w := range cfg.Webhooks {
			var parts []string
			if w.Host != "" {
				parts = append(parts, "host "+w.Host)
			}
			parts = append(parts, "methods "+strings.Join(w.Methods, ","))
			if w.Path != "" {
				parts = append(parts, "path "+w.Path)
			}
			if w.Header != "" {
				parts = append(parts, "header "+w.Header)
			}
			fmt.Fprintf(&b, " %s (%s);", w.Name, strings.Join(parts, ", "))
		}
	} else {
		methods := cfg.Spool.Methods
		if len(methods) == 0 {
			methods = []string{"POST"}
		}
		m := strings.Join(methods, ",")
		fmt.Fprintf(&b, "no webhooks block: an http:// %s, an https:// %s to a host named under hosts, and any request with a webhook-signature header are webhooks; "+
			"every other request is forwarded with the partner's own answer;", m, m)
	}
	var all, none []string
	for k, h := range cfg.Hosts {
		switch h.Webhooks {
		case config.WebhooksAll:
			all = append(all, k)
		case config.WebhooksNone:
			none = append(none, k)
		}
	}
	slices.Sort(all)
	slices.Sort(none)
	if len(all) > 0 {
		fmt.Fprintf(&b, " every request to %s is a webhook (webhooks: all);", strings.Join(all, ", "))
	}
	if len(none) > 0 {
		fmt.Fprintf(&b, " none to %s (webhooks: none);", strings.Join(none, ", "))
	}
	return strings.TrimSuffix(b.String(), ";")
}

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
