package main

// The sink role: an HTTP server, run as its own process (the bench binary
// re-executes itself with -role sink), that reads each request's body and
// answers a fixed status. It is both the no-op baseline for the ingest
// benchmark and the receiver of hookpace's deliveries.
//
// Every listener counts its own requests. Depending on -record it keeps
// nothing else ("none": the no-op baseline), the time of the latest arrival
// ("last": replay), or every arrival time ("all": pacing). GET /__stats and
// GET /__times on the same listener report them; those control requests are
// not counted.

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type endpoint struct {
	status int
	record string // none | last | all

	count  atomic.Int64
	lastNS atomic.Int64

	first     sync.Once
	firstURI  string // raw request-target of the first request
	firstHost string

	mu    sync.Mutex
	times []int64
}

func (e *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/__") {
		e.control(w, r)
		return
	}
	now := time.Now().UnixNano()
	io.Copy(io.Discard, r.Body)
	e.first.Do(func() { e.firstURI, e.firstHost = r.RequestURI, r.Host })
	switch e.record {
	case "last":
		for {
			old := e.lastNS.Load()
			if now <= old || e.lastNS.CompareAndSwap(old, now) {
				break
			}
		}
	case "all":
		e.mu.Lock()
		e.times = append(e.times, now)
		e.mu.Unlock()
	}
	e.count.Add(1)
	w.WriteHeader(e.status)
}

// sinkStats is what GET /__stats answers.
type sinkStats struct {
	Count     int64  `json:"count"`
	LastNS    int64  `json:"last_ns"`
	FirstURI  string `json:"first_uri"`
	FirstHost string `json:"first_host"`
}

func (e *endpoint) control(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/__stats":
		st := sinkStats{Count: e.count.Load(), LastNS: e.lastNS.Load()}
		// firstURI is written inside first.Do; Do again to get the happens-before edge.
		e.first.Do(func() {})
		st.FirstURI, st.FirstHost = e.firstURI, e.firstHost
		if e.record == "all" {
			e.mu.Lock()
			if n := len(e.times); n > 0 {
				st.LastNS = e.times[n-1]
			}
			e.mu.Unlock()
		}
		json.NewEncoder(w).Encode(st)
	case "/__times":
		e.mu.Lock()
		t := append([]int64(nil), e.times...)
		e.mu.Unlock()
		json.NewEncoder(w).Encode(t)
	default:
		http.NotFound(w, r)
	}
}

// sinkMain runs the sink role: n listeners on 127.0.0.1, their addresses
// printed on one stdout line ("SINK a,b,c"), until killed.
func sinkMain(n, status int, record string) {
	var addrs []string
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, "sink:", err)
			os.Exit(1)
		}
		addrs = append(addrs, ln.Addr().String())
		srv := &http.Server{Handler: &endpoint{status: status, record: record}}
		go srv.Serve(ln)
	}
	fmt.Printf("SINK %s\n", strings.Join(addrs, ","))
	select {}
}
