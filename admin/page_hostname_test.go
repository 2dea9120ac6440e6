package admin

import "testing"

// A host name breaks after its dots and its port's colon, never inside a
// label, and is escaped.
func TestBreakable(t *testing.T) {
	for in, want := range map[string]string{
		"partner-c.test": "partner-c.<wbr>test",
		"127.0.0.1:8443": "127.<wbr>0.<wbr>0.<wbr>1:<wbr>8443",
		"<b>.example":    "&lt;b&gt;.<wbr>example",
		"single":         "single",
		"[::1]:9":        "[:<wbr>:<wbr>1]:<wbr>9",
	} {
		if got := string(breakable(in)); got != want {
			t.Errorf("breakable(%q) = %q, want %q", in, got, want)
		}
	}
}
