// Command go-sender posts one webhook through hookpace with Go's net/http.
//
//	HTTP_PROXY=http://127.0.0.1:8080 go run ./examples/go-sender http://127.0.0.1:9999/hooks
//
// http.ProxyFromEnvironment (the default Transport's) never proxies
// loopback targets such as 127.0.0.1 or localhost: against a local
// receiver, a plain http.Post goes straight to it and hookpace never sees
// it. So this sender sets the proxy explicitly. (With real partners the
// default Transport and HTTP_PROXY are enough; or try locally with a
// hosts alias: `127.0.0.1 partner.test` in /etc/hosts, and
// http://partner.test:9999/hooks, which ProxyFromEnvironment proxies.)
package main

import (
	"cmp"
	"fmt"
	"log"
	"net/http"
	"net/url"
	"os"
	"strings"
)

func main() {
	target := "http://127.0.0.1:9999/hooks"
	if len(os.Args) > 1 {
		target = os.Args[1]
	}
	proxy, err := url.Parse(cmp.Or(os.Getenv("HTTP_PROXY"), "http://127.0.0.1:8080"))
	if err != nil {
		log.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}
	resp, err := client.Post(target, "application/json", strings.NewReader(`{"type":"invoice.paid","id":"evt_1"}`))
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	// 202 and an id: hookpace has the webhook.
	fmt.Println(resp.StatusCode, resp.Header.Get("X-Hookpace-Id"))
}
