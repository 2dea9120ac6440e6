package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestCatchUp(t *testing.T) {
	c := mustParse(t, `
hosts:
  "127.0.0.1:3000": {dedupe_window: 96h}
  "127.0.0.1:3001": {dedupe_window: 240h}
inbound:
  - listen: 127.0.0.1:8081
    to: http://127.0.0.1:3000
    paths: ["/webhooks/github"]
    dedupe: {header: X-GitHub-Delivery}
    catch_up: {provider: github, repo: octo/hello, hook_id: 12, token_file: /run/gh}
  - listen: 127.0.0.1:8082
    to: http://127.0.0.1:3000
    dedupe: {header: x-github-delivery}
    catch_up:
      provider: github
      app_id: 7
      private_key_file: /run/app.pem
      every: 1m
      since: 24h
      api_url: http://127.0.0.1:9999/
  - listen: 127.0.0.1:8083
    to: http://127.0.0.1:3001
    paths: ["/webhooks/stripe"]
    dedupe: {json: id}
    catch_up: {provider: stripe, api_key_file: /run/sk, types: [invoice.paid, "charge.*"]}
  - listen: 127.0.0.1:8084
    to: http://127.0.0.1:3002
    paths: ["/hooks/*"]
    dedupe: {json: id}
    catch_up: {provider: stripe, api_key_file: /run/sk, path: /hooks/stripe}
`)
	want := []*CatchUp{
		{Provider: "github", Every: Duration(5 * time.Minute), Since: Duration(72 * time.Hour), APIURL: "https://api.github.com",
			Repo: "octo/hello", HookID: 12, TokenFile: "/run/gh", Line: 10},
		{Provider: "github", Every: Duration(time.Minute), Since: Duration(24 * time.Hour), APIURL: "http://127.0.0.1:9999",
			AppID: 7, PrivateKeyFile: "/run/app.pem", Line: 15},
		// 30 days kept by Stripe, within the 10-day window: 10 days.
		{Provider: "stripe", Every: Duration(5 * time.Minute), Since: Duration(240 * time.Hour), APIURL: "https://api.stripe.com",
			APIKeyFile: "/run/sk", Types: []string{"invoice.paid", "charge.*"}, Path: "/webhooks/stripe", Line: 25},
		// the default 24 h window.
		{Provider: "stripe", Every: Duration(5 * time.Minute), Since: Duration(24 * time.Hour), APIURL: "https://api.stripe.com",
			APIKeyFile: "/run/sk", Path: "/hooks/stripe", Line: 30},
	}
	for i, w := range want {
		if got := c.Inbound[i].CatchUp; !reflect.DeepEqual(got, w) {
			t.Errorf("route %d:\n got %+v\nwant %+v", i, got, w)
		}
	}
}

func TestCatchUpErrors(t *testing.T) {
	const gh = "inbound:\n  - listen: ':8081'\n    to: 'http://a:1'\n    dedupe: {header: X-GitHub-Delivery}\n    catch_up: "
	const st = "inbound:\n  - listen: ':8081'\n    to: 'http://a:1'\n    paths: [/s]\n    dedupe: {json: id}\n    catch_up: "
	for _, tc := range []struct{ yaml, want string }{
		{gh + "{repo: a/b}", "config.yaml:5: inbound[0].catch_up.provider: required: github or stripe"},
		{gh + "{provider: gitlab}", "config.yaml:5: inbound[0].catch_up.provider: must be one of"},
		{gh + "{provider: github, repo: a/b, hook_id: 1, token_file: t, colour: red}", `unknown field "colour" in inbound[0].catch_up`},
		{gh + "{provider: github}", "config.yaml:5: inbound[0].catch_up: want one hook: repo or org"},
		{gh + "{provider: github, repo: a/b, app_id: 1, private_key_file: k}", "inbound[0].catch_up: want one hook"},
		{gh + "{provider: github, repo: ab, hook_id: 1, token_file: t}", "config.yaml:5: inbound[0].catch_up.repo: want owner/name"},
		{gh + "{provider: github, repo: a/b, token_file: t}", "inbound[0].catch_up.hook_id: required with repo or org"},
		{gh + "{provider: github, org: a, hook_id: 1}", "inbound[0].catch_up.token_file: required with repo or org"},
		{gh + "{provider: github, repo: a/b, org: a, hook_id: 1, token_file: t}", "inbound[0].catch_up.org: set one of repo and org"},
		{gh + "{provider: github, app_id: 1}", "inbound[0].catch_up.private_key_file: required with app_id"},
		{gh + "{provider: github, app_id: 1, private_key_file: k, token_file: t}", "inbound[0].catch_up.token_file: not with app_id"},
		{gh + "{provider: github, app_id: 1, private_key_file: k, api_key_file: t}", "inbound[0].catch_up.api_key_file: only for provider stripe"},
		{gh + "{provider: github, app_id: 1, private_key_file: k, since: 96h}", "config.yaml:5: inbound[0].catch_up.since: want a positive duration up to 72h0m0s (GitHub keeps a hook's deliveries for 3 days)"},
		{gh + "{provider: github, app_id: 1, private_key_file: k, since: 48h}", "inbound[0].catch_up.since: 48h0m0s is longer than the dedupe_window of the app's host a:1 (24h0m0s)"},
		{gh + "{provider: github, app_id: 1, private_key_file: k, every: 100ms}", "inbound[0].catch_up.every: must be at least 1s"},
		{gh + "{provider: github, app_id: 1, private_key_file: k, api_url: 'ftp://x'}", "inbound[0].catch_up.api_url: want an absolute http:// or https:// URL"},
		{"inbound:\n  - listen: ':8081'\n    to: 'http://a:1'\n    catch_up: {provider: github, app_id: 1, private_key_file: k}", "config.yaml:4: inbound[0].catch_up: catch-up from GitHub needs the route's dedupe: {header: X-GitHub-Delivery}"},
		{"hosts: {'a:1': {dedupe_window: 0s}}\n" + gh + "{provider: github, app_id: 1, private_key_file: k}", "inbound[0].catch_up: the app's host a:1 has dedupe_window 0 (off)"},
		{st + "{provider: stripe}", "config.yaml:6: inbound[0].catch_up.api_key_file: required"},
		{st + "{provider: stripe, api_key_file: k, repo: a/b}", "inbound[0].catch_up.repo: only for provider github"},
		{st + "{provider: stripe, api_key_file: k, path: '/s/*'}", "inbound[0].catch_up.path: want a plain path"},
		{st + "{provider: stripe, api_key_file: k, since: 800h}", "inbound[0].catch_up.since: want a positive duration up to 720h0m0s (Stripe keeps events for 30 days)"},
		{"inbound:\n  - listen: ':8081'\n    to: 'http://a:1'\n    dedupe: {json: id}\n    catch_up: {provider: stripe, api_key_file: k}", "inbound[0].catch_up.path: required: the path Stripe posts"},
		{"inbound:\n  - listen: ':8081'\n    to: 'http://a:1'\n    paths: [/s]\n    dedupe: {header: Stripe-Id}\n    catch_up: {provider: stripe, api_key_file: k}", "catch-up from Stripe needs the route's dedupe: {json: id}"},
	} {
		_, err := Parse("config.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s\n got %v\nwant %s", tc.yaml, err, tc.want)
		}
	}
}
