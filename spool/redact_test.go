package spool

import (
	"net/http"
	"reflect"
	"testing"
)

func TestRedactURLPaths(t *testing.T) {
	for in, want := range map[string]string{
		"https://hooks.slack.com/services/T000/B000/XXXXSECRET":             "https://hooks.slack.com/services/REDACTED",
		"https://HOOKS.slack.com:443/services/T000/B000/XXXXSECRET?x=1":     "https://HOOKS.slack.com:443/services/REDACTED?x=REDACTED",
		"https://hooks.slack.com/services/":                                 "https://hooks.slack.com/services/",
		"https://hooks.slack.com/other/path":                                "https://hooks.slack.com/other/path",
		"https://discord.com/api/webhooks/123/tokSECRET":                    "https://discord.com/api/webhooks/REDACTED",
		"https://ptb.discord.com/api/webhooks/123/tokSECRET":                "https://ptb.discord.com/api/webhooks/REDACTED",
		"https://acme.webhook.office.com/webhookb2/a@b/IncomingWebhook/c/d": "https://acme.webhook.office.com/webhookb2/REDACTED",
		"https://outlook.office.com/webhook/a@b/IncomingWebhook/c/d":        "https://outlook.office.com/webhook/REDACTED",
		"https://api.partner.example/hook":                                  "https://api.partner.example/hook",
		"https://api.partner.example/hook?sig=abc":                          "https://api.partner.example/hook?sig=REDACTED",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSetRedactPaths(t *testing.T) {
	// Not parallel: the rules are the process's.
	t.Cleanup(func() { _ = SetRedactPaths(nil) })
	if err := SetRedactPaths([]string{"in.example.com/t/*", "*.secret.example"}); err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"https://in.example.com/t/acme/k3y":       "https://in.example.com/t/acme/REDACTED",
		"https://in.example.com/other/acme/k3y":   "https://in.example.com/other/acme/k3y",
		"https://a.secret.example/k3y/more":       "https://a.secret.example/REDACTED",
		"https://a.secret.example/a%2Fb/c":        "https://a.secret.example/REDACTED",
		"https://secret.example/k3y":              "https://secret.example/k3y", // *. is for names under it
		"https://hooks.slack.com/services/T/B/k3": "https://hooks.slack.com/services/REDACTED",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
	for _, bad := range []string{"https://in.example.com/x", "/path/only", "*/x", "in.example.com/[", "a*b.example/x"} {
		if err := SetRedactPaths([]string{bad}); err == nil {
			t.Errorf("SetRedactPaths(%q) accepted", bad)
		}
	}
	if got := RedactURL("https://in.example.com/t/acme/k3y"); got != "https://in.example.com/t/acme/REDACTED" {
		t.Errorf("a refused set replaced the rules: %q", got)
	}
}

func TestRedactHeaderAllowList(t *testing.T) {
	h := http.Header{
		"Content-Type":          {"application/json"},
		"X-Jwt":                 {"eyJhbGciOi.x.y"},
		"X-Webhook-Hmac":        {"deadbeef"},
		"X-Custom":              {"anything"},
		"Location":              {"https://app.example/cb?code=abc123"},
		"X-Ratelimit-Remaining": {"7"},
		"Ratelimit-Policy":      {"10;w=1"},
		"Hookpace-Priority":     {"high"},
		"Accept-Encoding":       {"gzip"},
		"Retry-After":           {"3"},
		"Authorization":         {"Bearer t"},
	}
	want := http.Header{
		"Content-Type":          {"application/json"},
		"X-Jwt":                 {Redacted},
		"X-Webhook-Hmac":        {Redacted},
		"X-Custom":              {Redacted},
		"Location":              {"https://app.example/cb?code=REDACTED"},
		"X-Ratelimit-Remaining": {"7"},
		"Ratelimit-Policy":      {"10;w=1"},
		"Hookpace-Priority":     {"high"},
		"Accept-Encoding":       {"gzip"},
		"Retry-After":           {"3"},
		"Authorization":         {Redacted},
	}
	if got := RedactHeader(h); !reflect.DeepEqual(got, want) {
		t.Errorf("RedactHeader\n got %v\nwant %v", got, want)
	}
}
