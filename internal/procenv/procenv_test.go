package procenv

import (
	"strings"
	"testing"
)

func TestWithoutProxy(t *testing.T) {
	for _, k := range []string{"HTTP_PROXY", "https_proxy", "No_Proxy", "ALL_PROXY"} {
		t.Setenv(k, "http://127.0.0.1:1")
	}
	t.Setenv("HOOKPACE_KEEP", "1")
	env := WithoutProxy()
	kept := false
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasSuffix(strings.ToUpper(k), "_PROXY") {
			t.Errorf("%s left in the environment", kv)
		}
		kept = kept || kv == "HOOKPACE_KEEP=1"
	}
	if !kept {
		t.Error("an ordinary variable was dropped")
	}
}
