package main

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
)

const (
	docBegin = "<!-- peers:webhookx:begin: written by go run ./bench/peers -doc; edit the kit, not this section -->"
	docEnd   = "<!-- peers:webhookx:end -->"
)

// thousands formats x rounded, with commas between groups of three digits.
func thousands(x float64) string {
	s := fmt.Sprintf("%.0f", x)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func span(xs []float64) string {
	return fmt.Sprintf("%.1f–%.1f", slices.Min(xs), slices.Max(xs))
}

// peerVersion is the version word of "WebhookX 1.2.0 (commit)".
func peerVersion(m *machine) string {
	f := strings.Fields(m.webhookx)
	if len(f) >= 2 && f[1] != "dev" {
		return "v" + strings.TrimPrefix(f[1], "v")
	}
	return "(version unknown)"
}

// report is the Markdown section: the machine, the settings, one row per
// measurement, the ratios of each pair and their medians.
func report(o options, m *machine, pairs []pair) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Against webhookx %s (%s)\n\n", peerVersion(m), m.start.Format("2006-01-02"))
	fmt.Fprintf(&b, "Run %s–%s UTC by `go run ./bench/peers` with %d alternating pairs (hookpace first), "+
		"%s webhooks of 1 KiB over %d connections per ingest and delivery run, and %d/s offered for %v for the latency; "+
		"hookpace's concurrency for the sink's host %d. The machine:\n\n",
		m.start.Format("2006-01-02 15:04"), m.end.Format("15:04"), o.pairs, thousands(float64(o.n)), o.conns,
		o.rate, o.latencyFor, o.concurrency)
	fmt.Fprintf(&b, "```\n%s```\n\n", m.text())
	b.WriteString("| pair | system | ingest/s | CPU µs per accepted webhook | delivered/s | CPU µs per delivered webhook | POST→delivery p50 | p99 | accept→delivery p99 |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	var notes []string
	for i, pr := range pairs {
		for _, r := range pr {
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", i+1, r.sys,
				thousands(r.ingestRate()), thousands(r.ingestUS()), thousands(r.deliverRate()), thousands(r.deliverUS()),
				msStr(r.lat.postP50), msStr(r.lat.postP99), msStr(r.lat.acceptP99))
			if r.ingest.accepted < o.n || r.delivered < r.ingest.accepted || r.lat.delivered < r.lat.sent {
				notes = append(notes, fmt.Sprintf("pair %d, %s: %d of %d accepted (first error: %s), %d delivered; latency run: %d of %d accepted and delivered",
					i+1, r.sys, r.ingest.accepted, o.n, r.ingest.firstErr, r.delivered, r.lat.delivered, r.lat.sent))
			}
		}
	}
	b.WriteString("\nRatios within each pair (hookpace's advantage: above 1 is hookpace ahead):\n\n")
	b.WriteString("| pair | ingest/s, hookpace ÷ webhookx | delivered/s, hookpace ÷ webhookx | CPU per accepted, webhookx ÷ hookpace | CPU per delivered, webhookx ÷ hookpace | POST→delivery p99, webhookx ÷ hookpace |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- |\n")
	var cols [5][]float64
	for i, pr := range pairs {
		hp, wx := pr[0], pr[1]
		row := [5]float64{
			ratio(hp.ingestRate(), wx.ingestRate()),
			ratio(hp.deliverRate(), wx.deliverRate()),
			ratio(wx.ingestUS(), hp.ingestUS()),
			ratio(wx.deliverUS(), hp.deliverUS()),
			ratio(float64(wx.lat.postP99), float64(hp.lat.postP99)),
		}
		fmt.Fprintf(&b, "| %d |", i+1)
		for k, x := range row {
			cols[k] = append(cols[k], x)
			fmt.Fprintf(&b, " %.2f |", x)
		}
		b.WriteString("\n")
	}
	b.WriteString("| **median** |")
	for _, c := range cols {
		fmt.Fprintf(&b, " **%.2f** |", median(c))
	}
	b.WriteString("\n\n")
	fmt.Fprintf(&b, "In this run hookpace took in %s× (median %.1f×) and delivered %s× (median %.1f×) as many webhooks a second as webhookx, "+
		"for %s× (median %.1f×) less CPU per accepted webhook and %s× (median %.1f×) less per delivered one; "+
		"webhookx's POST→delivery p99 at %d/s was %s× hookpace's (median %.1f×).\n",
		span(cols[0]), median(cols[0]), span(cols[1]), median(cols[1]), span(cols[2]), median(cols[2]),
		span(cols[3]), median(cols[3]), o.rate, span(cols[4]), median(cols[4]))
	if len(notes) > 0 {
		b.WriteString("\nShort runs:\n\n")
		for _, n := range notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	return b.String()
}

// writeDoc puts the section between the kit's markers in path, replacing
// what a previous run wrote there, or appends it with the markers.
func writeDoc(path, section string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	block := docBegin + "\n" + section + docEnd + "\n"
	i := bytes.Index(old, []byte(docBegin))
	j := bytes.Index(old, []byte(docEnd))
	var out []byte
	switch {
	case i >= 0 && j > i:
		out = append(append(slices.Clone(old[:i]), block...), bytes.TrimPrefix(old[j+len(docEnd):], []byte("\n"))...)
	case i < 0 && j < 0:
		out = append(bytes.TrimRight(old, "\n"), "\n\n"+block...)
	default:
		return fmt.Errorf("only one of the markers %q and %q is there", docBegin, docEnd)
	}
	return os.WriteFile(path, out, 0o644)
}
