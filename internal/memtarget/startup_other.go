//go:build !linux

package memtarget

func releaseExecutable() {}
