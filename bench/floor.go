package main

// The group-commit floor: the least a durable HTTP ingest can do. An
// HTTP server (net/http, run as its own process: -role floor) appends
// each request's body to one file and answers 202 once a group commit
// has made it durable: the requests that arrive while one fdatasync runs
// join the next round, one fdatasync a round and nothing else.
//
// The floor section (-only floor) runs wrk -t1 against the floor and
// hookpace (and any -compare binaries) in alternating pairs on the same
// disk, and reports each one's CPU per accepted request and rate against
// the floor's in the same pair.

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/hookpace/hookpace/internal/procenv"
	"github.com/hookpace/hookpace/internal/proctest"
	"github.com/hookpace/hookpace/spool"
)

// floorLog is the floor server's state: the file, and the round that the
// next appends join.
type floorLog struct {
	f    *os.File
	mu   sync.Mutex
	cond *sync.Cond // the committer waits for a round with appends
	cur  *floorRound
	err  error // a failed write or fdatasync: every later request fails
}

// floorRound is one group commit: done is closed once its appends are
// durable, err says whether they are.
type floorRound struct {
	n    int
	done chan struct{}
	err  error
}

func newFloorLog(path string) (*floorLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open floor log %q: %w", path, err)
	}
	l := &floorLog{f: f, cur: &floorRound{done: make(chan struct{})}}
	l.cond = sync.NewCond(&l.mu)
	go l.commitLoop()
	return l, nil
}

// append writes b to the file in the current round and waits for that
// round's fdatasync.
func (l *floorLog) append(b []byte) error {
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return l.err
	}
	if _, err := l.f.Write(b); err != nil {
		l.err = fmt.Errorf("append to the floor log: %w", err)
		l.mu.Unlock()
		return l.err
	}
	r := l.cur
	r.n++
	if r.n == 1 {
		l.cond.Signal()
	}
	l.mu.Unlock()
	<-r.done
	return r.err
}

// commitLoop takes the current round once it has an append, opens the
// next one, and fdatasyncs: everything the taken round wrote was written
// before it was taken.
func (l *floorLog) commitLoop() {
	for {
		l.mu.Lock()
		for l.cur.n == 0 {
			l.cond.Wait()
		}
		r := l.cur
		l.cur = &floorRound{done: make(chan struct{})}
		l.mu.Unlock()
		if err := syscall.Fdatasync(int(l.f.Fd())); err != nil {
			r.err = fmt.Errorf("fdatasync the floor log: %w", err)
		}
		close(r.done)
	}
}

// floorHandler answers 202 once commit has made a request's body durable.
type floorHandler func(body []byte) error

func (commit floorHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := commit(body); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// badgerFloor is the least an ingest on hookpace's store can do: the
// floor's group commit, where a round is one Badger transaction that Sets
// each waiting body under a new key, committed with spool.BadgerOptions
// (SyncWrites: Badger syncs each commit itself; bodies under 4 KiB inline
// in its memtable's log and tables, as in hookpace's queue). Between the
// floor and this lies what Badger costs; between this and hookpace, what
// hookpace adds.
type badgerFloor struct {
	db   *badger.DB
	mu   sync.Mutex
	cond *sync.Cond // the committer waits for a round with bodies
	cur  *badgerRound
	seq  uint64
}

type badgerRound struct {
	bodies [][]byte
	done   chan struct{}
	err    error
}

func newBadgerFloor(dir string) (*badgerFloor, error) {
	db, err := badger.Open(spool.BadgerOptions(dir, slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, err
	}
	f := &badgerFloor{db: db, cur: &badgerRound{done: make(chan struct{})}}
	f.cond = sync.NewCond(&f.mu)
	go f.commitLoop()
	return f, nil
}

func (f *badgerFloor) commitLoop() {
	for {
		f.mu.Lock()
		for len(f.cur.bodies) == 0 {
			f.cond.Wait()
		}
		r := f.cur
		f.cur = &badgerRound{done: make(chan struct{})}
		first := f.seq
		f.seq += uint64(len(r.bodies))
		f.mu.Unlock()
		txn := f.db.NewTransaction(true)
		for i, b := range r.bodies {
			key := binary.BigEndian.AppendUint64([]byte("q"), first+uint64(i))
			if r.err = txn.Set(key, b); r.err != nil {
				break
			}
		}
		if r.err == nil {
			r.err = txn.Commit()
		} else {
			txn.Discard()
		}
		close(r.done)
	}
}

// append adds body to the current round and waits for its commit.
func (f *badgerFloor) append(body []byte) error {
	f.mu.Lock()
	round := f.cur
	round.bodies = append(round.bodies, body)
	if len(round.bodies) == 1 {
		f.cond.Signal()
	}
	f.mu.Unlock()
	<-round.done
	return round.err
}

// floorMain runs the floor role: it appends to path, listens on
// 127.0.0.1, prints "FLOOR addr" on stdout and serves until killed. With
// quickAck each read that returned data re-arms TCP_QUICKACK, so that a
// client that sends a request's headers and body apart with Nagle on
// (Python's requests through a proxy) is not held by a delayed ACK: the
// sender section uses the floor as that client's proxy.
//
// With inBadger path is a directory, and the server is the Badger floor.
func floorMain(path string, quickAck, inBadger bool) error {
	var h floorHandler
	if inBadger {
		f, err := newBadgerFloor(path)
		if err != nil {
			return err
		}
		h = f.append
	} else {
		l, err := newFloorLog(path)
		if err != nil {
			return err
		}
		h = l.append
	}
	var ln net.Listener
	var err error
	if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return err
	}
	if quickAck {
		ln = quickAckListener{ln}
	}
	fmt.Printf("FLOOR %s\n", ln.Addr())
	return (&http.Server{Handler: h}).Serve(ln)
}

// quickAckListener's connections re-arm TCP_QUICKACK after each read that
// returned data.
type quickAckListener struct{ net.Listener }

func (l quickAckListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c, nil
	}
	return &quickAckConn{Conn: c, raw: raw}, nil
}

type quickAckConn struct {
	net.Conn
	raw syscall.RawConn
}

func (c *quickAckConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.raw.Control(func(fd uintptr) {
			syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 1)
		})
	}
	return n, err
}

// floorProc is a running floor server.
type floorProc struct {
	cmd  *exec.Cmd
	addr string
}

func startFloor(path string, quickAck, inBadger bool) (*floorProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-role", "floor", "-floor-file", path, "-floor-quickack="+strconv.FormatBool(quickAck),
		"-floor-badger="+strconv.FormatBool(inBadger))
	cmd.Stderr = os.Stderr
	cmd.Env = procenv.WithoutProxy()
	proctest.DieWithParent(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the floor server: %w", err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "FLOOR ")
	if err != nil || !ok {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("the floor server did not start: said %q (%v)", line, err)
	}
	return &floorProc{cmd: cmd, addr: addr}, nil
}

func (f *floorProc) stop() {
	f.cmd.Process.Kill()
	f.cmd.Wait()
}

// floorRow is one measured run of the floor section.
type floorRow struct {
	pair   int
	target string // "floor", "badger floor", "hookpace", or a -compare binary's label
	res    *loadResult
	cpu    cpuSplit
	dist   float64
}

// cpuPerReq is the server's CPU per accepted (2xx) request.
func (r *floorRow) cpuPerReq() time.Duration {
	ok := r.res.Requests - r.res.Non2xx
	if ok <= 0 {
		return 0
	}
	return r.cpu.server / time.Duration(ok)
}

func (r *floorRow) okRPS() float64 {
	return float64(r.res.Requests-r.res.Non2xx) / r.res.Elapsed.Seconds()
}

// floor runs the floor section: -floor-pairs rounds of the floor, then
// hookpace (product defaults: log level info, journal on), then each
// -compare binary, each under wrk -t1 -c<conns> with 1 KiB absolute-form
// POSTs.
func (b *bench) floor() error {
	if !haveWrk() {
		return fmt.Errorf("the floor section needs wrk (apt-get install -y wrk)")
	}
	rig, err := b.newIngestRig()
	if err != nil {
		return err
	}
	defer rig.stop()
	if rig.script == "" {
		if rig.script, err = wrkScript(b.work, rig.target, b.body); err != nil {
			return err
		}
	}
	var extra string
	if b.compareYAML != "" {
		y, err := os.ReadFile(b.compareYAML)
		if err != nil {
			return fmt.Errorf("-compare-config: %w", err)
		}
		extra = string(y)
	}
	type bin struct{ label, path, extra string }
	bins := []bin{{"hookpace", b.bin, ""}}
	for i, p := range b.compare {
		bins = append(bins, bin{fmt.Sprintf("compare%d", i+1), p, extra})
	}
	b.rep.floorBins = nil
	for _, x := range bins {
		d := x.label + "=" + x.path
		if x.extra != "" {
			d += " + " + b.compareYAML
		}
		b.rep.floorBins = append(b.rep.floorBins, d)
	}
	for pair := 1; pair <= b.floorPairs; pair++ {
		for _, inBadger := range []bool{false, true} {
			row, err := b.floorOnce(rig, pair, inBadger)
			if err != nil {
				return err
			}
			b.rep.floor = append(b.rep.floor, row)
		}
		for _, x := range bins {
			logf("floor pair %d: wrk -t1 -c%d -> %s", pair, b.conns, x.label)
			row, err := b.floorHookpace(rig, pair, x.label, x.path, x.extra)
			if err != nil {
				return err
			}
			b.rep.floor = append(b.rep.floor, row)
		}
	}
	return nil
}

// floorLoad runs wrk -t1 against server after a 1 s warm-up and meters
// pid's CPU during the measured run.
func (b *bench) floorLoad(rig *ingestRig, server string, pid int) (*loadResult, cpuSplit, error) {
	if _, err := runWrk(server, rig.script, 1, b.conns, time.Second); err != nil {
		return nil, cpuSplit{}, err
	}
	b.waitQuiet("floor")
	m := startCPU(pid)
	res, err := runWrk(server, rig.script, 1, b.conns, b.dur)
	if err != nil {
		return nil, cpuSplit{}, err
	}
	return res, m.stop(res.GenCPU), nil
}

func (b *bench) floorOnce(rig *ingestRig, pair int, inBadger bool) (*floorRow, error) {
	target, path := "floor", "floor.log"
	if inBadger {
		target, path = "badger floor", "queue"
	}
	logf("floor pair %d: wrk -t1 -c%d -> %s", pair, b.conns, target)
	dir, err := os.MkdirTemp(b.work, "floor-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if !b.keep {
			os.RemoveAll(dir)
		}
	}()
	fp, err := startFloor(filepath.Join(dir, path), false, inBadger)
	if err != nil {
		return nil, err
	}
	defer fp.stop()
	res, cpu, err := b.floorLoad(rig, fp.addr, fp.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	return &floorRow{pair: pair, target: target, res: res, cpu: cpu, dist: cpu.disturbance(res.Elapsed)}, nil
}

func (b *bench) floorHookpace(rig *ingestRig, pair int, label, bin, extra string) (*floorRow, error) {
	hp, err := startHookpace(bin, b.work, "floor-"+label, hpConfig{logLevel: "info", bigSpool: true,
		hosts: []hostCfg{{key: rig.recvKey, rate: "1/s", burst: 1, concurrency: 1}}, extra: extra})
	if err != nil {
		return nil, err
	}
	defer hp.cleanup(b.keep)
	if err := hp.pause(rig.recvKey); err != nil {
		return nil, err
	}
	res, cpu, err := b.floorLoad(rig, hp.proxy, hp.pid())
	if err != nil {
		return nil, err
	}
	return &floorRow{pair: pair, target: label, res: res, cpu: cpu, dist: cpu.disturbance(res.Elapsed)}, nil
}

// writeFloor prints the floor section's rows and, per binary, the median
// over the pairs of its CPU per request and rate against the floor's.
func (r *report) writeFloor(s io.Writer) {
	fmt.Fprintf(s, "\nF. Against the group-commit floor (append + one fdatasync a round): wrk -t1 -c%d, 1 KiB absolute-form POSTs, %v a run,\n"+
		"   hookpace at product defaults (log.level info, journal on), receiver paused; alternating in pairs\n", r.conns, r.dur)
	fmt.Fprintf(s, "   binaries: %s\n", strings.Join(r.floorBins, ", "))
	tw := table(s)
	fmt.Fprintln(tw, "pair\ttarget\treq/s\tp50\tp99\tnon-2xx\tsrv µs/req\tcores srv/gen/others/kernel/steal\tCPU vs floor\trate vs floor\t")
	var floor *floorRow
	ratios := map[string][2][]float64{}
	var order []string
	for _, x := range r.floor {
		cpuR, rateR := "", ""
		if x.target == "floor" {
			floor = x
		} else if floor != nil && floor.pair == x.pair {
			c := x.cpuPerReq().Seconds() / floor.cpuPerReq().Seconds()
			q := x.okRPS() / floor.okRPS()
			cpuR, rateR = fmt.Sprintf("%.2f×", c), fmt.Sprintf("%.2f×", q)
			v, seen := ratios[x.target]
			if !seen {
				order = append(order, x.target)
			}
			v[0], v[1] = append(v[0], c), append(v[1], q)
			ratios[x.target] = v
		}
		fmt.Fprintf(tw, "%d\t%s\t%.0f\t%s\t%s\t%d\t%.1f\t%s%s\t%s\t%s\t\n", x.pair, x.target, x.okRPS(), ms(x.res.p50), ms(x.res.p99),
			x.res.Non2xx, float64(x.cpuPerReq())/1e3, r.mark(x.dist), cores(x.cpu, x.res.Elapsed), cpuR, rateR)
	}
	tw.Flush()
	for _, t := range order {
		v := ratios[t]
		fmt.Fprintf(s, "   %s: median CPU per accepted request %.2f× the floor's (pairs %s), rate %.2f× (pairs %s)\n",
			t, median(v[0]), fmtRatios(v[0]), median(v[1]), fmtRatios(v[1]))
	}
	// Against the Badger floor: what hookpace adds to its store's cost.
	bf := map[int]*floorRow{}
	vs := map[string][2][]float64{}
	for _, x := range r.floor {
		switch {
		case x.target == "badger floor":
			bf[x.pair] = x
		case x.target != "floor" && bf[x.pair] != nil:
			v := vs[x.target]
			v[0] = append(v[0], x.cpuPerReq().Seconds()/bf[x.pair].cpuPerReq().Seconds())
			v[1] = append(v[1], x.okRPS()/bf[x.pair].okRPS())
			vs[x.target] = v
		}
	}
	for _, t := range order {
		if v, ok := vs[t]; ok {
			fmt.Fprintf(s, "   %s: median CPU per accepted request %.2f× the Badger floor's (pairs %s), rate %.2f× (pairs %s)\n",
				t, median(v[0]), fmtRatios(v[0]), median(v[1]), fmtRatios(v[1]))
		}
	}
}

// floorTarget is the ingest bar: CPU per accepted webhook at most 1.5×
// the floor's and rate at least 0.6× (medians of the pairs).
func (r *report) floorTarget() target {
	var c, q []float64
	var floor *floorRow
	for _, x := range r.floor {
		switch {
		case x.target == "floor":
			floor = x
		case x.target == "hookpace" && floor != nil && floor.pair == x.pair:
			c = append(c, x.cpuPerReq().Seconds()/floor.cpuPerReq().Seconds())
			q = append(q, x.okRPS()/floor.okRPS())
		}
	}
	mc, mq := median(c), median(q)
	return target{
		name:     "ingest vs the group-commit floor: CPU/webhook ≤ 1.5×, rate ≥ 0.6× (medians of pairs)",
		measured: fmt.Sprintf("CPU %.2f×, rate %.2f× over %d pairs", mc, mq, len(c)),
		verdict:  verdict(len(c) > 0 && mc <= 1.5 && mq >= 0.6),
	}
}
