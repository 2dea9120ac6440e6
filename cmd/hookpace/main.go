// Command hookpace is a sidecar egress proxy that spools outbound webhooks
// durably and replays them paced per destination host. See package cli.
package main

import (
	"os"

	"github.com/hookpace/hookpace/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
