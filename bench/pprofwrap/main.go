// Command pprofwrap is hookpace with net/http/pprof served on
// $HOOKPACE_PPROF (host:port), for profiling under load: go run ./bench
// -profile FILE builds and runs it. The product binary has no pprof
// endpoint; this one is the same code (cli.Main) plus that listener.
//
// Besides net/http/pprof's handlers it serves /debug/cpuprofile/start?file=PATH
// and /debug/cpuprofile/stop, a CPU profile of exactly the span between
// the two calls (go run ./bench -only fleet -fleet-profile DIR); with
// &trace=PATH, an execution trace of the same span as well.
package main

import (
	"fmt"
	"net/http"
	_ "net/http/pprof"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"sync"

	"github.com/hookpace/hookpace/cli"
)

func main() {
	if addr := os.Getenv("HOOKPACE_PPROF"); addr != "" {
		var mu sync.Mutex
		var f, tf *os.File // the CPU profile, and the execution trace if asked for
		http.HandleFunc("/debug/cpuprofile/start", func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			out, err := os.Create(r.URL.Query().Get("file"))
			if err == nil {
				if err = pprof.StartCPUProfile(out); err != nil {
					out.Close()
				}
			}
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			f = out
			if p := r.URL.Query().Get("trace"); p != "" {
				if tf, err = os.Create(p); err == nil {
					if err = trace.Start(tf); err != nil {
						tf.Close()
						tf = nil
					}
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, "pprofwrap: trace:", err)
				}
			}
		})
		http.HandleFunc("/debug/cpuprofile/stop", func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			if f == nil {
				http.Error(w, "no profile running", http.StatusConflict)
				return
			}
			pprof.StopCPUProfile()
			f.Close()
			f = nil
			if tf != nil {
				trace.Stop()
				tf.Close()
				tf = nil
			}
		})
		go func() {
			if err := http.ListenAndServe(addr, nil); err != nil {
				fmt.Fprintln(os.Stderr, "pprof:", err)
			}
		}()
	}
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
