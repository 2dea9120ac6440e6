package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hookpace/hookpace/internal/overload"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Inbound route (on request: -only inbound): hookpace in front of an
// app's own webhook endpoint. 10,000 Standard Webhooks-signed webhooks
// offered at 1,000/s (64 connections) to a route verifying them, in front
// of an app with 4 workers of 20 ms that answers 503 after 500 ms of
// waiting; the app's hosts entry says concurrency: auto. Measured: the
// door's p50/p99 (verify, spool, fsync, answer), the time to deliver all
// from the first post, and the 503s the app answered.

type inboundRow struct {
	n, doorBad     int
	offered        time.Duration // from the first post to the last answer at the door
	p50, p99, pmax time.Duration
	delivered      int
	took           time.Duration
	capped         bool
	rejected, peak int
	others, steal  float64
}

func (b *bench) inbound() error {
	const whsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	n, rate, limit := 10000, 1000, 3*time.Minute
	if b.quick {
		n, limit = 2000, time.Minute
	}
	p := overload.New(4, 20*time.Millisecond, 0, 500*time.Millisecond)
	appAddr, stop, err := startPartner(p)
	if err != nil {
		return err
	}
	defer stop()
	door, err := freePort()
	if err != nil {
		return err
	}
	secret := filepath.Join(b.work, "inbound-whsec")
	if err := os.WriteFile(secret, []byte(whsec), 0o600); err != nil {
		return err
	}
	hp, err := startHookpace(b.bin, b.work, "inbound", hpConfig{logLevel: b.logLevel, bigSpool: true,
		extra: fmt.Sprintf("hosts:\n  %q: {rate: 1000/s, burst: 100, concurrency: auto, max_concurrency: 64, backoff_initial: 100ms}\n"+
			"inbound:\n  - {name: bench, listen: %q, to: \"http://%s\", verify: {scheme: standard-webhooks, secret_file: %q}, dedupe: {header: webhook-id}}\n",
			appAddr, door, appAddr, secret)})
	if err != nil {
		return err
	}
	defer hp.cleanup(b.keep)
	wh, err := standardwebhooks.NewWebhook(whsec)
	if err != nil {
		return err
	}
	b.waitQuiet("inbound")
	logf("inbound: offering %d signed webhooks at %d/s to the door", n, rate)
	client := &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}
	lat := make([]time.Duration, n)
	var bad int
	var mu sync.Mutex
	dist := startDisturbance()
	t0 := time.Now()
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for i := range jobs {
				id := "msg_" + strconv.Itoa(i)
				now := time.Now()
				sig, _ := wh.Sign(id, now, b.body)
				req, _ := http.NewRequest(http.MethodPost, "http://"+door+"/webhooks/bench", bytes.NewReader(b.body))
				req.Header = http.Header{"Content-Type": {"application/json"}, "Webhook-Id": {id},
					"Webhook-Timestamp": {strconv.FormatInt(now.Unix(), 10)}, "Webhook-Signature": {sig}}
				resp, err := client.Do(req)
				lat[i] = time.Since(now)
				if err == nil {
					resp.Body.Close()
				}
				if err != nil || resp.StatusCode/100 != 2 {
					mu.Lock()
					bad++
					mu.Unlock()
				}
			}
		})
	}
	for i := range n { // offered at rate, whatever the door's pace
		time.Sleep(time.Until(t0.Add(time.Duration(i) * time.Second / time.Duration(rate))))
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	row := &inboundRow{n: n, doorBad: bad, offered: time.Since(t0)}
	slices.Sort(lat)
	row.p50, row.p99, row.pmax = lat[n/2], lat[n*99/100], lat[n-1]
	row.delivered, row.took, row.capped = p.WaitOK(n, t0, limit)
	row.others, row.steal = dist.stop()
	row.peak, row.rejected, _ = p.Stats()
	b.rep.inbound = row
	return nil
}

func (r *report) writeInbound(s *strings.Builder) {
	a := r.inbound
	s.WriteString("\n7. Inbound route: signed webhooks (Standard Webhooks, verified at the door) offered at 1,000/s with 64\n" +
		"   connections, in front of an app with 4 workers of 20 ms, 503 after 500 ms waiting; concurrency: auto\n")
	took := a.took.Round(10 * time.Millisecond).String()
	if a.capped {
		took = "> " + took
	}
	fmt.Fprintf(s, "  door: %d webhooks in %v, %d not 2xx; latency p50 %v, p99 %v, max %v\n", a.n, a.offered.Round(10*time.Millisecond),
		a.doorBad, a.p50.Round(10*time.Microsecond), a.p99.Round(10*time.Microsecond), a.pmax.Round(time.Millisecond))
	fmt.Fprintf(s, "  app: %d delivered in %s from the first post (%.0f/s), %d answered 503, at most %d at once\n",
		a.delivered, took, float64(a.delivered)/a.took.Seconds(), a.rejected, a.peak)
	fmt.Fprintf(s, "  others' cores %.2f, steal %.2f\n", a.others, a.steal)
}
