package spool

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

func TestFoldsToFraming(t *testing.T) {
	for _, tc := range []struct {
		name  string
		field string // "" = not a look-alike
	}{
		{"Transfer_Encoding", "Transfer-Encoding"},
		{"Transfer---Encoding", "Transfer-Encoding"},
		{"Transfer___Encoding", "Transfer-Encoding"},
		{"TransferEncoding", "Transfer-Encoding"},
		{"Content_Length", "Content-Length"},
		{"Content__Length", "Content-Length"},
		{"content.length", "Content-Length"},
		{"T_E", "TE"},
		{"X_Host", ""},
		{"_Host", "Host"},
		{"Up_grade", "Upgrade"},
		{"Connection_", "Connection"},
		// the fields themselves, in any case: net/http frames by them
		{"Content-Length", ""},
		{"content-length", ""},
		{"Transfer-Encoding", ""},
		{"Te", ""},
		{"Host", ""},
		{"Connection", ""},
		{"Upgrade", ""},
		// other names
		{"Content-Type", ""},
		{"Content_Type", ""},
		{"X-Transfer-Encoding-Hint", ""},
		{"Stripe-Signature", ""},
		{"T", ""},
		{strings.Repeat("A", 100), ""},
	} {
		field, ok := FoldsToFraming(tc.name)
		if ok != (tc.field != "") || field != tc.field {
			t.Errorf("FoldsToFraming(%q) = %q, %v; want %q", tc.name, field, ok, tc.field)
		}
	}
}

func TestNewRequestRefusesWhatCannotBeSent(t *testing.T) {
	ok := http.Header{"Content-Type": {"application/json"}, "X-Id": {"1"}}
	for _, tc := range []struct {
		name, method, url string
		h                 http.Header
		bad               string // a word of the error; "" = builds
	}{
		{"plain", "POST", "http://partner.example/hook?a=1", ok, ""},
		{"https with port", "PUT", "https://partner.example:8443/h", ok, ""},
		{"escaped query kept", "POST", "http://p.example/h?q=%41", ok, ""},
		{"no header", "POST", "http://p.example/h", nil, ""},
		{"fragment with a bad escape", "POST", "http://partner/hook?a=1#%^", ok, "'#'"},
		{"valid fragment", "POST", "http://partner/hook#frag", ok, "'#'"},
		{"bad escape in the path", "POST", "http://partner/h%zz", ok, "escape"},
		{"no host", "POST", "http:///hook", ok, "host"},
		{"other scheme", "POST", "ftp://partner/hook", ok, "http or https"},
		{"relative", "POST", "/hook", ok, "http or https"},
		{"opaque", "POST", "http:partner", ok, "http or https"},
		{"method not a token", "PO ST", "http://p.example/h", ok, "method"},
		{"look-alike", "POST", "http://p.example/h", http.Header{"Transfer_Encoding": {"chunked"}}, "Transfer-Encoding"},
		{"look-alike length", "POST", "http://p.example/h", http.Header{"Content_Length": {"1000"}}, "Content-Length"},
		{"name not a token", "POST", "http://p.example/h", http.Header{"X Y": {"1"}}, "token"},
		{"value with LF", "POST", "http://p.example/h", http.Header{"X-Y": {"a\nb"}}, "control"},
		{"value with NUL", "POST", "http://p.example/h", http.Header{"X-Y": {"a\x00b"}}, "control"},
		{"nothing but an empty port", "POST", "http://:/h", ok, "http or https"},
		{"host not a Host header", "POST", "http://p<q.example/h", ok, "Host header"},
		{"method not UTF-8", "P\xffST", "http://p.example/h", ok, "method"},
	} {
		req, err := NewRequest(context.Background(), tc.method, tc.url, tc.h, []byte("{}"))
		// Ingest's check without the build says the same, word for word.
		_, nilErr := NewRequest(context.Background(), tc.method, tc.url, tc.h, nil)
		if cerr := CheckRequest(tc.method, tc.url, tc.h); fmt.Sprint(cerr) != fmt.Sprint(nilErr) {
			t.Errorf("%s: CheckRequest says %v, NewRequest %v", tc.name, cerr, nilErr)
		}
		switch {
		case tc.bad == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.bad != "" && err == nil:
			t.Errorf("%s: built %s %s, want an error", tc.name, req.Method, req.URL)
		case tc.bad != "" && !strings.Contains(err.Error(), tc.bad):
			t.Errorf("%s: error %q does not say %q", tc.name, err, tc.bad)
		case tc.bad == "" && req.URL.String() != tc.url:
			t.Errorf("%s: built for %s, stored %s", tc.name, req.URL, tc.url)
		}
	}
}
