package config

import "fmt"

// MemoryConfig is hookpace's memory target (package internal/memtarget):
// the Go heap's garbage is held down so that its memory stays near Target
// (bytes), but never below 1.5 times what is live. 0: Go's defaults. A
// GOMEMLIMIT in the environment wins over it.
type MemoryConfig struct {
	Target ByteSize
}

type rawMemory struct {
	Target opt[ByteSize] `yaml:"target"`
}

// DefaultMemoryTarget leaves room, within the 150 MiB hookpace aims at,
// for the binary's own pages and the spool's mapped files.
const DefaultMemoryTarget = ByteSize(96 << 20)

func resolveMemory(p *problems, r *rawMemory, m *MemoryConfig) {
	field(p, "memory.target", r.Target, &m.Target, func(v ByteSize) error {
		if v != 0 && v < 16<<20 {
			return fmt.Errorf("must be 0 (off) or at least 16MiB, got %s", v)
		}
		return nil
	})
}
