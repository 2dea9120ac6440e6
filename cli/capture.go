package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"

	"github.com/hookpace/hookpace/config"
)

// captureChain is the nat chain that hookpace's capture rules live in,
// jumped to from OUTPUT for TCP.
const captureChain = "HOOKPACE_OUTPUT"

// captureRules is what `hookpace capture rules` renders: the current
// network namespace's outbound TCP to Ports is REDIRECTed to To, except
// for the processes of ExcludeUID (hookpace itself: its deliveries must
// not be captured again) and for loopback and the Exclude CIDRs.
type captureRules struct {
	To         uint16
	ExcludeUID int
	Ports      []uint16
	Exclude    []netip.Prefix
	// RejectQUIC rejects outbound UDP to port 443 but ExcludeUID's, in
	// the filter table's HOOKPACE_QUIC: HTTP/3 is not captured, and a
	// client refused it falls back to TCP, which is.
	RejectQUIC bool
}

// quicChain is the filter chain of RejectQUIC's rules, jumped to from
// OUTPUT for UDP.
const quicChain = "HOOKPACE_QUIC"

// renderQUIC is the iptables-restore input of RejectQUIC (the same for
// both families), or "" without it; jump adds OUTPUT's jump.
func (c captureRules) renderQUIC(jump bool) string {
	if !c.RejectQUIC {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*filter\n:%s - [0:0]\n", quicChain)
	fmt.Fprintf(&b, "-A %s -m owner --uid-owner %d -j RETURN\n", quicChain, c.ExcludeUID)
	fmt.Fprintf(&b, "-A %s -p udp --dport 443 -j REJECT\n", quicChain)
	if jump {
		fmt.Fprintf(&b, "-A OUTPUT -p udp -j %s\n", quicChain)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// captureUncovered warns, for check-config, of partners on ports the
// default capture rules leave alone, or says nothing.
func captureUncovered(cfg *config.Config) string {
	if cfg.Capture.Listen == "" {
		return ""
	}
	var out []string
	for _, p := range cfg.HostPorts() {
		if p != 80 && p != 443 {
			out = append(out, strconv.Itoa(int(p)))
		}
	}
	if len(out) == 0 {
		return ""
	}
	return "capture: hosts names partners on port(s) " + strings.Join(out, ",") + ", which hookpace capture rules leaves alone by default (80,443): " +
		"give it --config " + cfg.Path + " (or --ports 80,443," + strings.Join(out, ",") + "), or their webhooks go out unpaced"
}

// render is the iptables-restore input for one family (6: ip6tables).
// Its chain line flushes HOOKPACE_OUTPUT under --noflush, so that applying
// it again replaces the rules; jump adds OUTPUT's jump to the chain.
func (c captureRules) render(family int, jump bool) string {
	var b strings.Builder
	loopback := "127.0.0.0/8"
	if family == 6 {
		loopback = "::1/128"
	}
	fmt.Fprintf(&b, "*nat\n:%s - [0:0]\n", captureChain)
	fmt.Fprintf(&b, "-A %s -m owner --uid-owner %d -j RETURN\n", captureChain, c.ExcludeUID)
	fmt.Fprintf(&b, "-A %s -d %s -j RETURN\n", captureChain, loopback)
	for _, p := range c.Exclude {
		if p.Addr().Is4() == (family == 4) {
			fmt.Fprintf(&b, "-A %s -d %s -j RETURN\n", captureChain, p.Masked())
		}
	}
	ports := make([]string, len(c.Ports))
	for i, p := range c.Ports {
		ports[i] = strconv.Itoa(int(p))
	}
	fmt.Fprintf(&b, "-A %s -p tcp -m multiport --dports %s -j REDIRECT --to-ports %d\n", captureChain, strings.Join(ports, ","), c.To)
	if jump {
		fmt.Fprintf(&b, "-A OUTPUT -p tcp -j %s\n", captureChain)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// captureCmd is hookpace capture rules.
func captureCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "rules" {
		return usageError{"hookpace capture rules --to PORT --exclude-uid UID [--ports 80,443] [--config FILE] [--exclude-cidr CIDR]... [--reject-quic] [--apply]"}
	}
	fs := newFlags("capture rules")
	to := fs.Uint("to", 0, "the capture listener's port (capture.listen)")
	uid := fs.Int("exclude-uid", -1, "hookpace's uid: its own connections are never captured")
	ports := fs.String("ports", "80,443", "comma-separated destination TCP ports to capture")
	var cidrs []netip.Prefix
	fs.Func("exclude-cidr", "a destination CIDR never captured (repeatable; e.g. the cluster's service and pod CIDRs)", func(s string) error {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return err
		}
		cidrs = append(cidrs, p)
		return nil
	})
	cfgPath := fs.String("config", "", "hookpace's config: every port its hosts keys name (a partner on :8443) is captured too")
	quic := fs.Bool("reject-quic", false, "reject outbound UDP to port 443 (HTTP/3) from every uid but hookpace's, so that HTTP/3 clients fall back to TCP, which is captured")
	apply := fs.Bool("apply", false, "apply the rules in the current network namespace (iptables-restore and ip6tables-restore --noflush) instead of printing them")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	if *cfgPath != "" {
		cfg, err := loadConfig(*cfgPath)
		if err != nil {
			return err
		}
		for _, p := range cfg.HostPorts() {
			if !slices.Contains(strings.Split(*ports, ","), strconv.Itoa(int(p))) {
				*ports += "," + strconv.Itoa(int(p))
			}
		}
	}
	r, err := newCaptureRules(*to, *uid, *ports, cidrs)
	if err != nil {
		return err
	}
	r.RejectQUIC = *quic
	if !*apply {
		fmt.Fprintf(stdout, "# IPv4: iptables-restore --noflush\n%s# IPv6: ip6tables-restore --noflush\n%s", r.render(4, true)+r.renderQUIC(true), r.render(6, true)+r.renderQUIC(true))
		return nil
	}
	for _, fam := range []struct {
		family          int
		restore, tables string
	}{{4, "iptables-restore", "iptables"}, {6, "ip6tables-restore", "ip6tables"}} {
		if _, err := os.Stat("/proc/net/if_inet6"); fam.family == 6 && err != nil {
			// A kernel without IPv6 (ipv6.disable=1) has no ip6tables nat table, and nothing to capture there.
			fmt.Fprintln(stderr, "IPv6 is off in this kernel (no /proc/net/if_inet6): IPv4 rules only")
			continue
		}
		// OUTPUT's jumps are added once: applying again replaces the chains' rules only.
		jumped := exec.Command(fam.tables, "-w", "-t", "nat", "-C", "OUTPUT", "-p", "tcp", "-j", captureChain).Run() == nil
		quicJumped := exec.Command(fam.tables, "-w", "-t", "filter", "-C", "OUTPUT", "-p", "udp", "-j", quicChain).Run() == nil
		cmd := exec.Command(fam.restore, "-w", "--noflush")
		cmd.Stdin = strings.NewReader(r.render(fam.family, !jumped) + r.renderQUIC(!quicJumped))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("apply the IPv%d capture rules with %s: %w: %s", fam.family, fam.restore, err, strings.TrimSpace(out.String()))
		}
	}
	fmt.Fprintf(stdout, "applied: TCP to ports %s is redirected to port %d, except uid %d, loopback and %d excluded CIDRs\n",
		*ports, r.To, r.ExcludeUID, len(r.Exclude))
	if r.RejectQUIC {
		fmt.Fprintf(stdout, "applied: UDP to port 443 (HTTP/3) is rejected, except uid %d: HTTP/3 clients fall back to TCP\n", r.ExcludeUID)
	}
	fmt.Fprintf(stderr, "check that hookpace's own connections are not captured: `iptables -t nat -L %s -v -n` shows the packets of the uid-owner RETURN rule growing as hookpace delivers, and hookpace logs no \"capture:\" refusals\n", captureChain)
	return nil
}

func newCaptureRules(to uint, uid int, ports string, cidrs []netip.Prefix) (captureRules, error) {
	if to == 0 || to > 65535 {
		return captureRules{}, usageError{"--to PORT is required: the capture listener's port (1..65535)"}
	}
	if uid < 0 {
		return captureRules{}, usageError{"--exclude-uid UID is required: hookpace's own uid, so that its deliveries are not captured again"}
	}
	r := captureRules{To: uint16(to), ExcludeUID: uid, Exclude: cidrs}
	for _, s := range strings.Split(ports, ",") {
		p, err := strconv.ParseUint(strings.TrimSpace(s), 10, 16)
		if err != nil || p == 0 {
			return captureRules{}, usageError{fmt.Sprintf("--ports: %q is not a port (1..65535)", s)}
		}
		if uint16(p) == r.To {
			return captureRules{}, usageError{"--ports must not hold --to: the capture listener would capture itself"}
		}
		r.Ports = append(r.Ports, uint16(p))
	}
	if len(r.Ports) > 15 {
		return captureRules{}, errors.New("--ports: at most 15 ports (iptables multiport)")
	}
	return r, nil
}
