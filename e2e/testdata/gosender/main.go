// Command gosender posts webhooks with net/http's default client, as an
// app would: the proxy comes from HTTPS_PROXY and the roots from
// SSL_CERT_FILE, with no code for either. It prints the status and the
// X-Hookpace-Id of each answer.
//
//	gosender URL COUNT
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
)

func main() {
	n, _ := strconv.Atoi(os.Args[2])
	for i := 1; i <= n; i++ {
		resp, err := http.Post(os.Args[1], "application/json", strings.NewReader(fmt.Sprintf(`{"via":"go","n":%d}`, i)))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("X-Hookpace-Id"))
	}
}
