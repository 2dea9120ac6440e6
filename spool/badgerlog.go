package spool

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
)

// badgerLogger sends Badger's own logging to slog. Badger is chatty at info
// level about routine compactions, so info and debug are logged at debug.
// Badger calls Debugf on every write, so a message is formatted only when
// its level is enabled. errors, if set, counts the errors Badger reports:
// some, such as a failed fsync of the value log, it only logs.
type badgerLogger struct {
	log    *slog.Logger
	errors *atomic.Uint64
}

func (l badgerLogger) Errorf(f string, a ...any) {
	if l.errors != nil {
		l.errors.Add(1)
	}
	l.logf(slog.LevelError, f, a)
}

func (l badgerLogger) Warningf(f string, a ...any) { l.logf(slog.LevelWarn, f, a) }
func (l badgerLogger) Infof(f string, a ...any)    { l.logf(slog.LevelDebug, f, a) }
func (l badgerLogger) Debugf(f string, a ...any)   { l.logf(slog.LevelDebug, f, a) }

func (l badgerLogger) logf(level slog.Level, f string, a []any) {
	ctx := context.Background()
	if !l.log.Enabled(ctx, level) {
		return
	}
	l.log.Log(ctx, level, "badger: "+strings.TrimSpace(fmt.Sprintf(f, a...)))
}
