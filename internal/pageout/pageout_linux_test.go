package pageout

import (
	"os"
	"testing"
)

// TestMappingsNameTheExecutable: the test binary's own code is mapped
// read-only from its file, and releasing it leaves the process running
// the same code.
func TestMappingsNameTheExecutable(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ms, err := Mappings()
	if err != nil {
		t.Fatal(err)
	}
	var code int
	for _, m := range ms {
		if m.Path != exe {
			continue
		}
		if m.End <= m.Start {
			t.Fatalf("mapping %x-%x is empty", m.Start, m.End)
		}
		if !m.Writable {
			code++
			Release(m.Start, m.End)
		}
	}
	if code == 0 {
		t.Fatalf("no read-only mapping of %s among %d mappings", exe, len(ms))
	}
}
