//go:build !linux

package spool

func trimResident(dir string, limit int64) {}

func trimWhileOpening(dir string, limit int64) (stop func()) { return func() {} }
