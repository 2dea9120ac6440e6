//go:build !linux

package spool

import "errors"

// logSync needs inotify: elsewhere Badger syncs every commit itself
// (SyncWrites), and the spool looks at its directory every round.
type logSync struct{}

func openLogSync(string) (*logSync, error) { return nil, errors.New("no inotify") }
func (*logSync) scan(bool) error           { return nil }
func (*logSync) sync(bool) error           { return nil }
func (*logSync) movedSince() bool          { return true }
func (*logSync) close()                    {}

// removeEmptyLogs: see logsync_linux.go; here Badger syncs each commit,
// and an empty log left by a power cut is not removed.
func removeEmptyLogs(string) error { return nil }
