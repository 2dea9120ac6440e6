// Command bench measures hookpace against the performance targets in
// one run and prints one table:
//
//  1. durable ingest: 1 KiB POSTs over 64 connections through hookpace
//     versus a no-op Go HTTP server (reads the body, answers 202), with the
//     same load generator and the same request bytes (absolute form); plus
//     p99 latency at half of hookpace's measured maximum (open loop);
//  2. replay: N queued webhooks to a fast local receiver versus a plain Go
//     client posting the same N bodies with the same concurrency;
//  3. RSS: idle after start, and with 200,000 1 KiB webhooks queued,
//     behind one host and then over 5,000 hosts (-rss-hosts);
//  4. pacing: the most sends the receiver saw in any window W against
//     B + R·W, and the achieved rate against R;
//  5. sender: 50 sequential POSTs from one Python requests.Session through
//     hookpace versus straight to the no-op server (python3-requests);
//  6. reuse (on request: -only reuse): new connections per delivery over
//     5,000 hosts (reuse.go);
//  7. adaptive (on request: -only adaptive): fixed concurrency 4,
//     concurrency: auto and a fixed 64 against an overloadable partner and
//     a fast healthy one, side by side (adaptive.go);
//  8. hosts (on request: -only hosts): 4 webhooks to each of 50,000 hosts,
//     peak memory, and the time and size of /metrics and /v1/hosts
//     (hosts.go).
//  9. latency (on request: -only latency): accept→delivery at 200/s,
//     the receiver's arrival against the sender's 202 (latency.go).
//
// Run it from the module root:
//
//	go run ./bench            # full run (7-10 minutes on 2 cores)
//	go run ./bench -quick     # smaller, shorter: a smoke test
//	go run ./bench -only ingest -profile /tmp/hookpace.cpu.pprof
//	go run ./bench -only profile -profile /tmp/hookpace.cpu.pprof -log-level info   # the profile alone
//	go run ./bench -only sender
//	go run ./bench -only floor -compare /tmp/old/hookpace   # vs the group-commit floor (floor.go)
//	go run ./bench -only capture     # as root: capture.listen against the proxy listener
//
// It builds ./cmd/hookpace (or tests -binary) and starts every process it
// measures itself: hookpace on a fresh spool per measurement, and the no-op
// server and receivers as separate processes (this program run with
// -role sink). wrk (apt-get install wrk) is used for the ingest maximum when
// installed; the built-in Go generator always runs as well.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/hookpace/hookpace/bench/hostinfo"
)

const bodySize = 1024

func main() {
	flag.Parse()
	if flags.role == "sink" {
		sinkMain(flags.sinkListeners, flags.sinkStatus, flags.sinkRecord)
		return
	}
	if flags.role == "floor" {
		if err := floorMain(flags.floorFile, flags.floorQuickAck, flags.floorBadger); err != nil {
			fmt.Fprintln(os.Stderr, "bench -role floor:", err)
			os.Exit(1)
		}
		return
	}
	if flags.role == "capture" {
		if err := captureMain(flags); err != nil {
			fmt.Fprintln(os.Stderr, "bench -role capture:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(flags); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type bench struct {
	*settings
	root, bin, work string
	body            []byte
	rep             *report
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
}

func run(s *settings) error {
	if err := s.resolve(); err != nil {
		return err
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp(s.workdir, "hookpace-bench-")
	if err != nil {
		return err
	}
	if !s.keep {
		defer os.RemoveAll(work)
	}
	b := &bench{settings: s, root: root, work: work, body: makeBody(),
		rep: &report{conns: s.conns, dur: s.dur, disturbed: s.disturbed, retries: s.retries}}
	b.bin = s.binary
	if b.bin == "" {
		b.bin = filepath.Join(work, "hookpace")
		logf("building ./cmd/hookpace")
		if err := goBuild(root, b.bin, "./cmd/hookpace"); err != nil {
			return err
		}
	}
	b.rep.header = machineInfo(root, work, b)
	fmt.Fprint(os.Stderr, b.rep.header)
	if !haveWrk() {
		logf("NOTE: wrk is not installed; the ingest maximum is measured with the Go generator only (apt-get install -y wrk)")
	}
	if err := b.runSections(); err != nil {
		return err
	}
	o, st := othersCores(3 * time.Second)
	b.rep.loadEnd = fmt.Sprintf("%s; other processes using %.2f cores, steal %.2f (3s sample)", hostinfo.LoadAvg(), o, st)
	out := b.rep.String()
	fmt.Print(out)
	if s.out != "" {
		return os.WriteFile(s.out, []byte(out), 0o644)
	}
	return nil
}

// runSections runs the sections -only asks for, in the report's order.
func (b *bench) runSections() error {
	steps := []struct {
		name string
		run  func() error
	}{
		{"ingest", b.ingest},
		{"floor", b.floor},
		{"profile", func() error {
			if b.profile == "" || !b.settings.sections["ingest"] && !b.settings.sections["profile"] {
				return nil
			}
			return b.runProfile(b.profile)
		}},
		{"replay", b.replay},
		{"rss", b.rss},
		{"pacing", b.pacing},
		{"fleet", b.fleet},
		{"fleetscale", b.fleetScaleSection},
		{"sender", b.sender},
		{"adaptive", b.adaptive},
		{"fairness", b.fairness},
		{"inbound", b.inbound},
		{"capture", b.capture},
		{"reuse", b.reuse},
		{"hosts", b.hostsSection},
		{"latency", b.latency},
	}
	for _, st := range steps {
		if st.name != "profile" && !b.settings.sections[st.name] {
			continue
		}
		if err := st.run(); err != nil {
			return fmt.Errorf("%s: %w", st.name, err)
		}
	}
	return nil
}

// makeBody is a 1 KiB JSON webhook body.
func makeBody() []byte {
	var b bytes.Buffer
	b.WriteString(`{"event":"invoice.paid","id":"evt_0123456789","data":"`)
	for b.Len() < bodySize-2 {
		b.WriteByte('a' + byte(b.Len()%26))
	}
	b.WriteString(`"}`)
	return b.Bytes()
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			bytes.Contains(b, []byte("module github.com/hookpace/hookpace\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("run from inside the hookpace module (go run ./bench)")
		}
		dir = parent
	}
}

func goBuild(root, out, pkg string) error {
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}
