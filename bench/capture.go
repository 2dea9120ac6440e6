package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Capture listener (on request: -only capture, as root): the same 1 KiB
// POSTs, closed loop over -conns keep-alive connections, once to the proxy
// listener (absolute-form, as an app with HTTP_PROXY sends) and once to
// the partner's own address, which an iptables REDIRECT hands to
// capture.listen (origin-form, as an app without proxy variables sends).
// SO_ORIGINAL_DST needs a real REDIRECT, so the section runs in a network
// namespace of its own (ip netns): the partner is 203.0.113.10 on its
// loopback, `hookpace capture rules --apply` redirects TCP 80, and
// hookpace runs as uid 65534, which the rules exclude, while the
// generator (root) is captured. Both arms run there, in alternating
// pairs (proxy first, then capture first), each on a fresh hookpace with
// the host paused: the spool's fsync is in both, the deliveries in
// neither. Measured per arm: webhooks/s and hookpace's CPU per webhook.

const capturePartner = "203.0.113.10"

// captureArm is one measured run of one arm.
type captureArm struct {
	Arm      string  // "proxy" or "capture"
	Pair     int     // from 1
	RPS      float64 // 2xx answers per second
	Requests int64
	Non2xx   int64
	SockErr  int64
	CPUus    float64 // hookpace's CPU per request, µs
	Dist     float64 // cores other processes and steal took
	Tries    int
}

// capture runs the section in a new network namespace, through this
// program started again inside it with -role capture.
func (b *bench) capture() error {
	if os.Geteuid() != 0 {
		return errors.New("needs root: it makes a network namespace with iptables rules (sudo go run ./bench -only capture)")
	}
	ns := fmt.Sprintf("hpbench-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns add %s: %v: %s", ns, err, out)
	}
	defer exec.Command("ip", "netns", "delete", ns).Run()
	for _, args := range [][]string{{"link", "set", "lo", "up"}, {"addr", "add", capturePartner + "/32", "dev", "lo"}} {
		if out, err := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip -n %s %v: %v: %s", ns, args, err, out)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command("ip", "netns", "exec", ns, self, "-role", "capture", "-binary", b.bin,
		"-d", b.dur.String(), "-reps", strconv.Itoa(b.reps), "-conns", strconv.Itoa(b.conns), "-log-level", b.logLevel,
		"-quiet", fmt.Sprint(b.quiet), "-quiet-wait", b.quietWait.String(), "-disturbed", fmt.Sprint(b.disturbed),
		"-retries", strconv.Itoa(b.retries), "-workdir", b.work)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("the section in network namespace %s: %w", ns, err)
	}
	return json.Unmarshal(out.Bytes(), &b.rep.capture)
}

// captureMain is -role capture: the measurements, inside the namespace;
// the rows go to stdout as JSON.
func captureMain(s *settings) error {
	if err := s.resolve(); err != nil {
		return err
	}
	dir, err := os.MkdirTemp(s.workdir, "capture-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// uid 65534 runs hookpace: it needs to reach its binary and spool.
	for d := dir; d != "/" && d != filepath.Dir(d); d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o005 != 0o005 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o005); err != nil {
				return err
			}
		}
	}
	bin := filepath.Join(dir, "hookpace")
	if err := copyFile(s.binary, bin, 0o755); err != nil {
		return err
	}
	wrapper := filepath.Join(dir, "hookpace-65534")
	script := "#!/bin/sh\nexec setpriv --reuid 65534 --regid 65534 --clear-groups -- " + bin + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		return err
	}
	const capturePort = "15001"
	if out, err := exec.Command(bin, "capture", "rules", "--to", capturePort, "--exclude-uid", "65534", "--ports", "80", "--apply").CombinedOutput(); err != nil {
		return fmt.Errorf("hookpace capture rules --apply: %v: %s", err, out)
	}
	body := makeBody()
	proxyReq, err := rawRequest("http://"+capturePartner+"/hook", body)
	if err != nil {
		return err
	}
	captureReq := append([]byte(fmt.Sprintf("POST /hook HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		capturePartner, len(body))), body...)
	var rows []*captureArm
	for pair := 1; pair <= s.reps*2; pair++ {
		arms := []string{"proxy", "capture"}
		if pair%2 == 0 {
			slices.Reverse(arms)
		}
		for _, arm := range arms {
			row, err := attempt(s, "capture "+arm, func() (*captureArm, float64, error) {
				return captureOnce(s, dir, wrapper, capturePort, arm, pair, proxyReq, captureReq)
			}, func(r *captureArm, n int) { r.Tries = n })
			if err != nil {
				return err
			}
			rows = append(rows, row)
		}
	}
	return json.NewEncoder(os.Stdout).Encode(rows)
}

// captureOnce measures one arm on a fresh hookpace.
func captureOnce(s *settings, dir, wrapper, capturePort, arm string, pair int, proxyReq, captureReq []byte) (*captureArm, float64, error) {
	h := &hookpace{bin: wrapper, exited: make(chan struct{})}
	var err error
	if h.dir, err = os.MkdirTemp(dir, arm+"-"); err != nil {
		return nil, 0, err
	}
	defer os.RemoveAll(h.dir)
	if err := os.Chown(h.dir, 65534, 65534); err != nil {
		return nil, 0, err
	}
	if h.proxy, err = freePort(); err != nil {
		return nil, 0, err
	}
	if h.admin, err = freePort(); err != nil {
		return nil, 0, err
	}
	// Both arms' webhooks are filed under the partner's address, paused.
	h.configText = fmt.Sprintf("listen: %s\nadmin: %s\nlog:\n  level: %s\nspool:\n  dir: %s\n  max_messages: 5000000\n  max_bytes: 8GiB\n"+
		"capture:\n  listen: 127.0.0.1:%s\negress:\n  allow: [%q]\nshutdown:\n  timeout: 2s\nhosts:\n  %q: {rate: 1/s, burst: 1, concurrency: 1}\n",
		h.proxy, h.admin, s.logLevel, filepath.Join(h.dir, "spool"), capturePort, capturePartner, capturePartner)
	cfgPath := filepath.Join(h.dir, "hookpace.yaml")
	if err := os.WriteFile(cfgPath, []byte(h.configText), 0o644); err != nil {
		return nil, 0, err
	}
	h.logPath = filepath.Join(h.dir, "hookpace.log")
	if err := h.launch(cfgPath, hpConfig{}, "start", 30*time.Second); err != nil {
		return nil, 0, err
	}
	defer h.kill()
	if err := h.pause(capturePartner); err != nil {
		return nil, 0, err
	}
	server, req := h.proxy, proxyReq
	if arm == "capture" {
		server, req = capturePartner+":80", captureReq
	}
	logf("capture pair %d: %s", pair, arm)
	rawClosedLoop(server, req, s.conns, time.Second) // warm-up
	s.waitQuiet("capture")
	m := startCPU(h.pid())
	res := rawClosedLoop(server, req, s.conns, s.dur)
	cpu := m.stop(0)
	ok := res.Requests - res.Non2xx
	if ok == 0 {
		return nil, 0, fmt.Errorf("%s: no 2xx answer (%d non-2xx, %d socket errors)\n%s", arm, res.Non2xx, res.SockErr, h.tail())
	}
	// Nothing listens on the partner's port 80 but through the REDIRECT:
	// a capture arm's 202s came from the capture listener, and each is a
	// webhook in the spool.
	if n, err := queued(h, capturePartner); err != nil || n < ok {
		return nil, 0, fmt.Errorf("%s: %d webhooks queued for %s, want at least %d (%v)", arm, n, capturePartner, ok, err)
	}
	row := &captureArm{Arm: arm, Pair: pair, RPS: float64(ok) / res.Elapsed.Seconds(), Requests: res.Requests, Non2xx: res.Non2xx,
		SockErr: res.SockErr, CPUus: float64(cpu.server.Microseconds()) / float64(res.Requests)}
	row.Dist = cpu.disturbance(res.Elapsed)
	return row, row.Dist, nil
}

// queued is a host's queued count from the admin API.
func queued(h *hookpace, host string) (int64, error) {
	resp, err := ctl.Get("http://" + h.admin + "/v1/hosts/" + host)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var st struct{ Queued int64 }
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return 0, err
	}
	return st.Queued, nil
}

func copyFile(from, to string, mode os.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// captureRatios are, per pair, capture's webhooks/s over the proxy's and
// capture's CPU per webhook over the proxy's.
func captureRatios(rows []*captureArm) (rps, cpu []float64) {
	by := map[int]map[string]*captureArm{}
	for _, r := range rows {
		if by[r.Pair] == nil {
			by[r.Pair] = map[string]*captureArm{}
		}
		by[r.Pair][r.Arm] = r
	}
	for p := 1; p <= len(by); p++ {
		a, c := by[p]["proxy"], by[p]["capture"]
		if a == nil || c == nil {
			continue
		}
		rps = append(rps, c.RPS/a.RPS)
		cpu = append(cpu, c.CPUus/a.CPUus)
	}
	return rps, cpu
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

func (r *report) writeCapture(s *strings.Builder) {
	fmt.Fprintf(s, "\n8. Capture listener vs proxy listener: 1 KiB POSTs, closed loop, %d connections, plain HTTP, in a network\n"+
		"   namespace (iptables REDIRECT of TCP 80 to capture.listen); alternating pairs, host paused\n", r.conns)
	tw := table(s)
	fmt.Fprintln(tw, "pair\tarm\treq/s\tsrv µs/req\tnon-2xx\tsock err\tothers+steal\ttries\t")
	for _, a := range r.capture {
		fmt.Fprintf(tw, "%d\t%s\t%.0f\t%.1f\t%d\t%d\t%.2f%s\t%d\t\n", a.Pair, a.Arm, a.RPS, a.CPUus, a.Non2xx, a.SockErr, a.Dist, r.mark(a.Dist), a.Tries)
	}
	tw.Flush()
	rps, cpu := captureRatios(r.capture)
	fmt.Fprintf(s, "  capture/proxy per pair: webhooks/s %s; CPU per webhook %s\n", fmtRatios(rps), fmtRatios(cpu))
	fmt.Fprintf(s, "  median: webhooks/s %.3f (target >= 0.9), CPU per webhook %.3f (target <= 1.10)\n", median(rps), median(cpu))
}

func fmtRatios(xs []float64) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprintf("%.3f", x)
	}
	return strings.Join(out, " ")
}
