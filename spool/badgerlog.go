package spool

import (
	"fmt"
	"log/slog"
	"strings"
)

// badgerLogger sends Badger's own logging to slog. Badger is chatty at info
// level about routine compactions, so info and debug are logged at debug.
type badgerLogger struct{ log *slog.Logger }

func (l badgerLogger) Errorf(f string, a ...any) { l.log.Error(l.msg(f, a)) }
func (l badgerLogger) Warningf(f string, a ...any) {
	l.log.Warn(l.msg(f, a))
}
func (l badgerLogger) Infof(f string, a ...any)  { l.log.Debug(l.msg(f, a)) }
func (l badgerLogger) Debugf(f string, a ...any) { l.log.Debug(l.msg(f, a)) }

func (l badgerLogger) msg(f string, a []any) string {
	return "badger: " + strings.TrimSpace(fmt.Sprintf(f, a...))
}
