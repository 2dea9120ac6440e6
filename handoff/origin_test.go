package handoff

import (
	"testing"

	"github.com/hookpace/hookpace/spool"
)

func TestOrigin(t *testing.T) {
	want := spool.Ref{Spool: 0x7ade39a04a975928, Seq: 0x2a}
	for _, tt := range []struct {
		in string
		ok bool
	}{
		{"pod-a/7ade39a04a975928000000000000002a", true},
		{"a/b/7ade39a04a975928000000000000002a", true}, // the id follows the last slash
		{"pod-a/000000000000002a", false},              // an older hookpace's id, without its spool
		{"7ade39a04a975928000000000000002a", false},
		{"pod-a/", false},
		{"pod-a/zz", false},
	} {
		got, ok := Origin(tt.in)
		if ok != tt.ok || ok && got != want {
			t.Errorf("Origin(%q) = %v, %v; want %v, %v", tt.in, got, ok, want, tt.ok)
		}
	}
}
