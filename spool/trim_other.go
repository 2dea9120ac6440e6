//go:build !linux

package spool

func trimResident(dir string, limit int64) {}
