package main

// The Go load generator: raw keep-alive TCP connections, each writing the
// same pre-built absolute-form request that wrk sends and reading the answer
// with http.ReadResponse. It costs the client a few microseconds a request,
// where net/http's Transport costs tens, which matters on a 2-core machine
// where the generator shares the CPUs with the server it measures.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// rawRequest is the request line, headers and body, byte for byte.
func rawRequest(target string, body []byte) ([]byte, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		target, u.Host, len(body))
	return append([]byte(head), body...), nil
}

type rawConn struct {
	addr string
	c    net.Conn
	br   *bufio.Reader
}

func (rc *rawConn) dial() error {
	if rc.c != nil {
		rc.c.Close()
	}
	c, err := net.DialTimeout("tcp", rc.addr, 10*time.Second)
	if err != nil {
		rc.c = nil
		return err
	}
	rc.c, rc.br = c, bufio.NewReaderSize(c, 4096)
	return nil
}

// do sends req and reads the answer; on any error the connection is
// dropped and the next call redials.
func (rc *rawConn) do(req []byte) (int, error) {
	if rc.c == nil {
		if err := rc.dial(); err != nil {
			return 0, err
		}
	}
	rc.c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := rc.c.Write(req); err != nil {
		rc.c.Close()
		rc.c = nil
		return 0, err
	}
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		rc.c.Close()
		rc.c = nil
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.Close {
		rc.c.Close()
		rc.c = nil
	}
	return resp.StatusCode, err
}

func (rc *rawConn) close() {
	if rc.c != nil {
		rc.c.Close()
	}
}

// workerStats collects one worker's counts, merged at the end.
type workerStats struct {
	n, bad, errs int64
	lat, lag     []time.Duration
	secMax       map[int]time.Duration // open loop: worst latency per second of the run
}

func (w *workerStats) record(code int, err error, lat time.Duration) {
	switch {
	case err != nil:
		w.errs++
		return
	case code < 200 || code > 299:
		w.bad++
	}
	w.n++
	w.lat = append(w.lat, lat)
}

type merger struct {
	mu     sync.Mutex
	res    *loadResult
	lag    []time.Duration
	secMax map[int]time.Duration
}

func (m *merger) add(w *workerStats) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.res.Requests += w.n
	m.res.Non2xx += w.bad
	m.res.SockErr += w.errs
	m.res.lat = append(m.res.lat, w.lat...)
	m.lag = append(m.lag, w.lag...)
	for k, v := range w.secMax {
		if m.secMax == nil {
			m.secMax = map[int]time.Duration{}
		}
		m.secMax[k] = max(m.secMax[k], v)
	}
}

// rawClosedLoop: conns connections, each sending back to back for dur.
func rawClosedLoop(server string, req []byte, conns int, dur time.Duration) *loadResult {
	m := &merger{res: &loadResult{Gen: "go"}}
	var wg sync.WaitGroup
	start := time.Now()
	cutoff := start.Add(dur)
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rc := &rawConn{addr: server}
			defer rc.close()
			w := &workerStats{}
			for {
				t := time.Now()
				if !t.Before(cutoff) {
					break
				}
				code, err := rc.do(req)
				w.record(code, err, time.Since(t))
			}
			m.add(w)
		}()
	}
	wg.Wait()
	m.res.Elapsed = time.Since(start)
	m.res.finish()
	return m.res
}

type tick struct{ due, sent time.Time }

// rawOpenLoop offers rate requests per second for dur over conns
// connections, whatever the server's answer time. A request's latency runs
// from the moment the scheduler released it, so time spent waiting for a
// free connection counts (no coordinated omission). The scheduler's own
// lateness (time.Sleep here overshoots by up to ~1ms) is reported apart as
// lag and is not in the latency.
func rawOpenLoop(server string, req []byte, conns int, rate float64, dur time.Duration) (*loadResult, time.Duration) {
	// Open and warm the connections first.
	rcs := make([]*rawConn, conns)
	for i := range rcs {
		rcs[i] = &rawConn{addr: server}
		rcs[i].do(req)
	}
	total := int(rate * dur.Seconds())
	sched := make(chan tick, total)
	m := &merger{res: &loadResult{Gen: "go-open", Rate: rate}}
	start := time.Now().Add(5 * time.Millisecond)
	go func() {
		for i := 0; i < total; i++ {
			due := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				time.Sleep(d)
			}
			sched <- tick{due: due, sent: time.Now()}
		}
		close(sched)
	}()
	var wg sync.WaitGroup
	for _, rc := range rcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer rc.close()
			w := &workerStats{secMax: map[int]time.Duration{}}
			for t := range sched {
				code, err := rc.do(req)
				d := time.Since(t.sent)
				w.record(code, err, d)
				w.lag = append(w.lag, t.sent.Sub(t.due))
				sec := int(t.due.Sub(start) / time.Second)
				w.secMax[sec] = max(w.secMax[sec], d)
			}
			m.add(w)
		}()
	}
	wg.Wait()
	m.res.Elapsed = time.Since(start)
	m.res.finish()
	lag := pctile(m.lag, 99)
	for i := 0; i < len(m.secMax); i++ {
		m.res.secMax = append(m.res.secMax, m.secMax[i])
	}
	return m.res, lag
}

func pctile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sortDurations(s)
	i := int(p/100*float64(len(s)) + 0.5)
	return s[min(max(i-1, 0), len(s)-1)]
}
