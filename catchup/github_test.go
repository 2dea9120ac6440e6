package catchup

import (
	"net/http"
	"testing"
)

func TestLinkNext(t *testing.T) {
	for _, tc := range []struct{ link, want string }{
		{``, ""},
		{`<https://api.github.com/repos/o/r/hooks/1/deliveries?per_page=100&cursor=v1_12>; rel="next"`,
			"https://api.github.com/repos/o/r/hooks/1/deliveries?per_page=100&cursor=v1_12"},
		{`<https://api.github.com/x?cursor=a>; rel="prev", <https://api.github.com/x?cursor=b>; rel="next"`, "https://api.github.com/x?cursor=b"},
		{`<https://api.github.com/x?cursor=a>; rel=prev`, ""},
		{`<https://api.github.com/x?cursor=b>;rel=next`, "https://api.github.com/x?cursor=b"},
		{`https://api.github.com/x; rel="next"`, ""},
	} {
		h := http.Header{}
		if tc.link != "" {
			h.Set("Link", tc.link)
		}
		if got := linkNext(h); got != tc.want {
			t.Errorf("Link %q: next %q, want %q", tc.link, got, tc.want)
		}
	}
}
