package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// 9. Connection reuse over many hosts (-only reuse): H hosts at 127.0.x.y
// (-reuse-hosts, default 5,000) on one receiver in this process that
// counts the TCP connections it accepts (http.Server.ConnState). Each
// round queues one webhook per host and waits until all are delivered;
// -reuse-rounds rounds in all. Reported: new connections per delivery
// (all rounds, and rounds after the first, where a kept connection
// serves every host), hookpace's CPU per delivery and its VmRSS after
// the last round (the idle pool is in it).

type reuseResult struct {
	hosts, rounds int
	delivered     int64
	conns         int64 // accepted by the receiver, all rounds
	connsLater    int64 // accepted in rounds after the first
	cpu           time.Duration
	elapsed       time.Duration
	rssKiB        int64
}

// connCounter is a receiver on every loopback address that answers 200 and
// counts what it accepted and answered.
type connCounter struct {
	ln     net.Listener
	srv    *http.Server
	served atomic.Int64
	opened atomic.Int64
}

func startConnCounter() (*connCounter, error) {
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		return nil, fmt.Errorf("receiver listen: %w", err)
	}
	c := &connCounter{ln: ln}
	c.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			c.served.Add(1)
		}),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				c.opened.Add(1)
			}
		},
		IdleTimeout: 5 * time.Minute, // the receiver never closes first: what is counted is hookpace's reuse
	}
	go c.srv.Serve(ln)
	return c, nil
}

func (b *bench) reuse() error {
	recv, err := startConnCounter()
	if err != nil {
		return err
	}
	defer recv.srv.Close()
	_, port, _ := net.SplitHostPort(recv.ln.Addr().String())
	hosts := b.reuseHosts
	targets := make([]string, hosts)
	for i := range targets {
		targets[i] = fmt.Sprintf("http://127.0.%d.%d:%s/hook", 1+i/250, i%250+1, port)
	}
	b.waitQuiet("reuse")
	cfg := hpConfig{logLevel: b.logLevel, bigSpool: true}
	hp, err := startHookpace(b.bin, b.work, "reuse", cfg)
	if err != nil {
		return err
	}
	defer hp.cleanup(b.keep)
	r := &reuseResult{hosts: hosts, rounds: b.reuseRounds}
	cpu0, t0 := cpuTime(hp.pid()), time.Now()
	for round := 0; round < b.reuseRounds; round++ {
		if round == 1 {
			r.connsLater = -recv.opened.Load()
		}
		if bad, err := postSpread(hp.proxy, targets, b.body, hosts, 64); bad > 0 {
			return fmt.Errorf("round %d: %d not accepted (%v)", round, bad, err)
		}
		want := int64((round + 1) * hosts)
		deadline := time.Now().Add(5 * time.Minute)
		for recv.served.Load() < want {
			if time.Now().After(deadline) {
				return fmt.Errorf("round %d: receiver got %d of %d", round, recv.served.Load(), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	r.elapsed, r.cpu = time.Since(t0), cpuTime(hp.pid())-cpu0
	r.delivered, r.conns = recv.served.Load(), recv.opened.Load()
	r.connsLater += r.conns
	r.rssKiB, _, _ = memKiB(hp.pid())
	logf("reuse: %d deliveries to %d hosts, %d connections accepted (%d after the first round), %v CPU",
		r.delivered, hosts, r.conns, r.connsLater, r.cpu)
	b.rep.reuse = append(b.rep.reuse, r)
	return nil
}

func (r *report) writeReuse(s io.Writer) {
	fmt.Fprintf(s, "\nConnection reuse: one webhook per host per round, every round delivered before the next\n")
	tw := table(s)
	fmt.Fprintln(tw, "  hosts\trounds\tdelivered\tnew conns\tper delivery\tafter round 1, per delivery\tCPU/delivery\tVmRSS after\t")
	for _, x := range r.reuse {
		later := x.delivered - int64(x.hosts)
		fmt.Fprintf(tw, "  %d\t%d\t%d\t%d\t%.3f\t%.3f\t%.0f µs\t%.1f MiB\t\n", x.hosts, x.rounds, x.delivered, x.conns,
			float64(x.conns)/float64(x.delivered), float64(x.connsLater)/float64(max(later, 1)),
			float64(x.cpu.Microseconds())/float64(x.delivered), float64(x.rssKiB)/1024)
	}
	tw.Flush()
	io.WriteString(s, strings.Repeat(" ", 3)+"hosts are 127.0.x.y on one listener; new conns: http.Server.ConnState StateNew at the receiver.\n")
}
