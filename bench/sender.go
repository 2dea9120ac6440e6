package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// 5. One sequential sender: Python's requests
//
// The most common sender posts one webhook after another on one
// requests.Session. Through a proxy, urllib3 leaves Nagle on and writes a
// POST's headers and body apart, which costs a delayed ACK per request
// unless the proxy acknowledges at once (server/quickack_linux.go). This
// section times N sequential POSTs straight to the no-op server, through
// the group-commit floor used as the proxy (floor.go: one fdatasync a
// round, quick ACKs), and through hookpace, alternating, -sender-runs
// times per rep. At one request at a time a group commit has no company:
// the floor's column is what one fdatasync a request costs this client
// on this disk, and the Badger floor's (floor.go) what one commit into
// hookpace's store does.

// senderScript is run with python3: argv proxy ("" = direct), url, n. It
// warms the session up with one POST, then prints the seconds the n
// sequential POSTs took.
const senderScript = `
import sys, time, requests
proxy, url, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = requests.Session()
s.trust_env = False
if proxy:
    s.proxies = {"http": proxy}
body = open(sys.argv[4], "rb").read()
h = {"Content-Type": "application/json"}
def post():
    r = s.post(url, data=body, headers=h)
    if r.status_code // 100 != 2:
        sys.exit("POST %s: %d" % (url, r.status_code))
post()
t = time.perf_counter()
for _ in range(n):
    post()
print(time.perf_counter() - t)
`

type senderRow struct {
	rep, run    int
	n           int
	direct, hp  time.Duration // per POST
	floor       time.Duration // per POST, through the floor as the proxy
	badger      time.Duration // per POST, through the Badger floor as the proxy
	others      float64       // cores other processes took meanwhile
	othersSteal float64       // cores the hypervisor stole meanwhile
}

// checkSender fails early when python3 with requests is missing.
func checkSender() error {
	if out, err := exec.Command("python3", "-c", "import requests").CombinedOutput(); err != nil {
		return fmt.Errorf("the sender section needs python3 with requests (apt-get install -y python3-requests): %v %s", err, out)
	}
	return nil
}

func (b *bench) sender() error {
	if err := checkSender(); err != nil {
		return err
	}
	rig, err := b.newIngestRig()
	if err != nil {
		return err
	}
	defer rig.stop()
	bodyFile := filepath.Join(b.work, "sender-body.json")
	if err := os.WriteFile(bodyFile, b.body, 0o644); err != nil {
		return err
	}
	fdir, err := os.MkdirTemp(b.work, "sender-floor-")
	if err != nil {
		return err
	}
	fp, err := startFloor(filepath.Join(fdir, "floor.log"), true, false)
	if err != nil {
		return err
	}
	defer fp.stop()
	bfp, err := startFloor(filepath.Join(fdir, "queue"), true, true)
	if err != nil {
		return err
	}
	defer bfp.stop()
	for rep := 1; rep <= b.reps; rep++ {
		hp, err := b.startIngestHookpace(rig, b.logLevel)
		if err != nil {
			return err
		}
		b.waitQuiet("sender")
		for run := 1; run <= b.senderRuns; run++ {
			row := &senderRow{rep: rep, run: run, n: b.senderN}
			dist := startDisturbance()
			direct, err := runSender("", "http://"+rig.noop.addrs[0]+"/hook", b.senderN, bodyFile)
			if err != nil {
				hp.cleanup(b.keep)
				return err
			}
			floor, err := runSender("http://"+fp.addr, rig.target, b.senderN, bodyFile)
			if err != nil {
				hp.cleanup(b.keep)
				return err
			}
			inBadger, err := runSender("http://"+bfp.addr, rig.target, b.senderN, bodyFile)
			if err != nil {
				hp.cleanup(b.keep)
				return err
			}
			through, err := runSender("http://"+hp.proxy, rig.target, b.senderN, bodyFile)
			if err != nil {
				hp.cleanup(b.keep)
				return err
			}
			row.others, row.othersSteal = dist.stop()
			row.direct, row.floor, row.badger, row.hp = direct, floor, inBadger, through
			logf("sender rep %d run %d: %d sequential POSTs, direct %s, through the floor %s, the Badger floor %s, hookpace %s each",
				rep, run, b.senderN, ms(direct), ms(floor), ms(inBadger), ms(through))
			b.rep.sender = append(b.rep.sender, row)
		}
		hp.cleanup(b.keep)
	}
	return nil
}

// runSender runs senderScript and returns the time per POST.
func runSender(proxy, url string, n int, bodyFile string) (time.Duration, error) {
	out, err := exec.Command("python3", "-c", senderScript, proxy, url, strconv.Itoa(n), bodyFile).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("python3 sender (proxy %q): %v: %s", proxy, err, out)
	}
	sec, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil {
		return 0, fmt.Errorf("python3 sender said %q", out)
	}
	return time.Duration(sec * float64(time.Second) / float64(n)), nil
}

func (r *report) writeSender(s io.Writer) {
	n := r.sender[0].n
	fmt.Fprintf(s, "\n5. One sequential sender: Python requests.Session, %d POSTs of 1 KiB one after another (after one warm-up POST),\n"+
		"   straight to the no-op server, through the group-commit floor as the proxy (one fdatasync a request, quick ACKs),\n"+
		"   through the Badger floor (one Badger commit a request), then through hookpace (receiver paused), alternating\n", n)
	tw := table(s)
	fmt.Fprintln(tw, "rep\trun\tdirect ms/POST\tfloor ms/POST\tBadger floor ms/POST\thookpace ms/POST\thookpace - direct\thookpace - floor\thookpace - Badger floor\tothers+steal cores\t")
	for _, x := range r.sender {
		fmt.Fprintf(tw, "%d\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%s%.2f\t\n", x.rep, x.run, ms64(x.direct), ms64(x.floor), ms64(x.badger), ms64(x.hp),
			ms64(x.hp-x.direct), ms64(x.hp-x.floor), ms64(x.hp-x.badger), r.mark(x.others+x.othersSteal), x.others+x.othersSteal)
	}
	tw.Flush()
	io.WriteString(s, "   hookpace's CPU per request, and so the cost of acknowledging at once, is in the ingest section (srv µs/req).\n")
}

func (r *report) senderTarget() target {
	var hp, direct []float64
	for _, x := range r.sender {
		hp = append(hp, ms64(x.hp))
		direct = append(direct, ms64(x.direct))
	}
	worst := 0.0
	for _, v := range hp {
		worst = max(worst, v)
	}
	return target{
		name: fmt.Sprintf("Python requests.Session, %d sequential POSTs through hookpace ≤ 3 ms each on average", r.sender[0].n),
		measured: fmt.Sprintf("%.2f ms mean of %d runs (worst run %.2f ms); direct to the no-op server %.2f ms",
			mean(hp), len(hp), worst, mean(direct)),
		verdict: verdict(worst <= 3),
	}
}

func ms64(d time.Duration) float64 { return float64(d) / 1e6 }
