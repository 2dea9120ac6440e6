// Command pprofwrap is hookpace with net/http/pprof served on
// $HOOKPACE_PPROF (host:port), for profiling under load: go run ./bench
// -profile FILE builds and runs it. The product binary has no pprof
// endpoint; this one is the same code (cli.Main) plus that listener.
package main

import (
	"fmt"
	"net/http"
	_ "net/http/pprof"
	"os"

	"github.com/hookpace/hookpace/cli"
)

func main() {
	if addr := os.Getenv("HOOKPACE_PPROF"); addr != "" {
		go func() {
			if err := http.ListenAndServe(addr, nil); err != nil {
				fmt.Fprintln(os.Stderr, "pprof:", err)
			}
		}()
	}
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
