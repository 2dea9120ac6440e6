//go:build !unix

package spool

func diskFree(dir string) (int64, error) { return 1 << 62, nil }

func diskSize(dir string) (int64, error) { return 1 << 62, nil }
