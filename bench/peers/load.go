package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The load is the same bytes for every system: a 1 KiB JSON event whose
// "seq" names the run (g<gen>) and the webhook's index, so that the sink
// can tell a delivery of this run from a late one of an earlier run.

const bodySize = 1024

func body(gen, i int) []byte {
	b := fmt.Appendf(nil, `{"event_type":"bench.event","data":{"seq":"g%d-%d","pad":"`, gen, i)
	pad := bodySize - len(b) - len(`"}}`)
	b = append(b, bytes.Repeat([]byte("x"), max(pad, 0))...)
	return append(b, `"}}`...)
}

var seqKey = []byte(`"seq":"g`)

// parseSeq finds "seq":"g<gen>-<i>" in a delivered body, wherever the
// system put the event (the body as sent, or wrapped in an envelope).
func parseSeq(b []byte) (gen, i int, ok bool) {
	k := bytes.Index(b, seqKey)
	if k < 0 {
		return 0, 0, false
	}
	rest := b[k+len(seqKey):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return 0, 0, false
	}
	g, n, found := bytes.Cut(rest[:end], []byte("-"))
	if !found {
		return 0, 0, false
	}
	gen, err1 := strconv.Atoi(string(g))
	i, err2 := strconv.Atoi(string(n))
	return gen, i, err1 == nil && err2 == nil
}

// sink is the receiver every system delivers to: it answers 200 at once
// and records when each webhook of the current run first arrived.
type sink struct {
	addr string
	srv  *http.Server

	mu     sync.Mutex
	gen    int
	recv   []int64 // UnixNano of the first delivery, 0 before it
	got    int
	dups   int
	stray  int
	allIn  chan struct{}
	closed bool
}

func startSink() (*sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("starting the sink: %w", err)
	}
	s := &sink{addr: ln.Addr().String()}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

// expect starts run gen of n webhooks; the returned channel closes when
// the sink has all n.
func (s *sink) expect(gen, n int) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen, s.recv, s.got, s.dups, s.stray = gen, make([]int64, n), 0, 0, 0
	s.allIn, s.closed = make(chan struct{}), false
	return s.allIn
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	now := time.Now().UnixNano()
	gen, i, ok := parseSeq(b)
	s.mu.Lock()
	switch {
	case !ok || gen != s.gen || i < 0 || i >= len(s.recv):
		s.stray++
	case s.recv[i] != 0:
		s.dups++
	default:
		s.recv[i] = now
		s.got++
		if s.got == len(s.recv) && !s.closed {
			close(s.allIn)
			s.closed = true
		}
	}
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (s *sink) count() (got, dups int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got, s.dups
}

// spread is the time from the run's first delivery to its last.
func (s *sink) spread() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var lo, hi int64
	for _, t := range s.recv {
		if t == 0 {
			continue
		}
		if lo == 0 || t < lo {
			lo = t
		}
		hi = max(hi, t)
	}
	return time.Duration(hi - lo)
}

func (s *sink) times() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.recv)
}

// poster sends one run's webhooks to one system: the same bytes, in the
// form that system takes them (through hookpace as a proxy, or to
// webhookx's ingest listener).
type poster struct {
	client *http.Client
	url    string
}

func newPoster(target string, proxy func(*http.Request) (*url.URL, error), conns int) *poster {
	tr := &http.Transport{
		Proxy:               proxy,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		MaxConnsPerHost:     conns,
		DisableCompression:  true,
	}
	return &poster{client: &http.Client{Transport: tr, Timeout: 60 * time.Second}, url: target}
}

func (p *poster) post(ctx context.Context, b []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

type ingestResult struct {
	accepted, refused, failed int
	elapsed                   time.Duration
	firstErr                  string
}

// ingest posts n webhooks of run gen over conns connections, each
// connection one request after another, and counts the 2xx answers.
func (p *poster) ingest(ctx context.Context, gen, n, conns int) ingestResult {
	var next, accepted, refused, failed atomic.Int64
	var errOnce sync.Once
	var res ingestResult
	var wg sync.WaitGroup
	start := time.Now()
	for range conns {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				code, err := p.post(ctx, body(gen, i))
				switch {
				case err != nil:
					failed.Add(1)
					errOnce.Do(func() { res.firstErr = err.Error() })
				case code/100 == 2:
					accepted.Add(1)
				default:
					refused.Add(1)
					errOnce.Do(func() { res.firstErr = "status " + strconv.Itoa(code) })
				}
			}
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.accepted, res.refused, res.failed = int(accepted.Load()), int(refused.Load()), int(failed.Load())
	return res
}

type latencyResult struct {
	sent, accepted, delivered int
	// early counts the deliveries that reached the sink before the 2xx
	// answer reached the client.
	early int
	// post is from the start of the POST to the first delivery; accept
	// from the 2xx answer, 0 for an early delivery.
	postP50, postP99, acceptP99 time.Duration
}

// latency offers rate webhooks a second for d, open loop (each at its
// scheduled time, whether or not the earlier ones were answered), and
// measures each webhook's first delivery at the sink from the start of its
// POST and from its 2xx answer.
func (p *poster) latency(ctx context.Context, s *sink, gen, rate int, d, wait time.Duration) (latencyResult, error) {
	n := int(float64(rate) * d.Seconds())
	allIn := s.expect(gen, n)
	sent := make([]int64, n)
	acc := make([]int64, n)
	interval := time.Second / time.Duration(rate)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		if w := time.Until(start.Add(time.Duration(i) * interval)); w > 0 {
			time.Sleep(w)
		}
		wg.Go(func() {
			sent[i] = time.Now().UnixNano()
			code, err := p.post(ctx, body(gen, i))
			if err == nil && code/100 == 2 {
				acc[i] = time.Now().UnixNano()
			}
		})
	}
	wg.Wait()
	select {
	case <-allIn:
	case <-time.After(wait):
	case <-ctx.Done():
		return latencyResult{}, ctx.Err()
	}
	recv := s.times()
	res := latencyResult{sent: n}
	var post, accept []time.Duration
	for i := range n {
		if acc[i] != 0 {
			res.accepted++
		}
		if acc[i] == 0 || recv[i] == 0 {
			continue
		}
		if recv[i] < acc[i] {
			res.early++
		}
		post = append(post, time.Duration(recv[i]-sent[i]))
		accept = append(accept, time.Duration(max(recv[i]-acc[i], 0)))
	}
	res.delivered = len(post)
	if len(post) == 0 {
		return res, fmt.Errorf("latency run: none of %d webhooks was both accepted and delivered within %v", n, wait)
	}
	slices.Sort(post)
	slices.Sort(accept)
	res.postP50, res.postP99, res.acceptP99 = post[len(post)/2], post[len(post)*99/100], accept[len(accept)*99/100]
	return res, nil
}
