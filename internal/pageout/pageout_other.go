//go:build !linux

package pageout

// Mappings lists nothing where the process's mappings are not readable.
func Mappings() ([]Mapping, error) { return nil, nil }

// Release does nothing outside Linux.
func Release(start, end uint64) {}
