// Command receiver is a stand-in partner for trying hookpace locally: it
// prints every webhook it gets with the time since the previous one, and
// can answer 429 to show hookpace's holding pattern.
//
//	go run ./examples/receiver -addr 127.0.0.1:9999 [-limit 5]
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"sync"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9999", "listen address")
	limit := flag.Int("limit", 0, "answer 429 (Retry-After: 2) beyond this many requests per second; 0 = never")
	flag.Parse()
	var mu sync.Mutex
	var last, window time.Time
	var n, inWindow int
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		now := time.Now()
		n++
		gap := time.Duration(0)
		if !last.IsZero() {
			gap = now.Sub(last)
		}
		last = now
		if now.Sub(window) >= time.Second {
			window, inWindow = now, 0
		}
		inWindow++
		throttled := *limit > 0 && inWindow > *limit
		mu.Unlock()
		status := http.StatusOK
		if throttled {
			w.Header().Set("Retry-After", "2")
			status = http.StatusTooManyRequests
		}
		w.WriteHeader(status)
		fmt.Printf("#%-4d %s  +%-8v %d %s %s %s\n", n, now.Format("15:04:05.000"), gap.Round(time.Millisecond), status, r.Method, r.URL.Path, body)
	})
	log.Printf("receiver on http://%s", *addr)
	log.Fatal(http.ListenAndServe(*addr, nil))
}
