package config

import (
	"reflect"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// JournalConfig bounds the journal: the history of every webhook and its
// attempts, kept in the spool's kept database. It has its own
// budget and never counts toward the spool's limits.
type JournalConfig struct {
	Off          bool     // keep no history
	Retain       Duration // entries older than this go, oldest first
	MaxBytes     ByteSize // 0: a quarter of spool.max_bytes
	ResponseBody ByteSize // bytes of each partner answer kept per attempt
	Bodies       bool     // keep each delivered webhook's request, to send it again (hookpace msg resend)
	// RedactPaths are host/path patterns whose URLs show only the path
	// prefix the pattern names, beside spool.DefaultRedactPaths; reloadable.
	RedactPaths []string
}

type rawJournal struct {
	Off          opt[bool]          `yaml:"off"`
	Retain       opt[Duration]      `yaml:"retain"`
	MaxBytes     opt[ByteSize]      `yaml:"max_bytes"`
	ResponseBody opt[ByteSize]      `yaml:"response_body"`
	Bodies       opt[bool]          `yaml:"bodies"`
	RedactPaths  opt[[]opt[string]] `yaml:"redact_paths"`
}

func defaultJournal() JournalConfig {
	return JournalConfig{Retain: Duration(14 * 24 * time.Hour), ResponseBody: 1 << 10}
}

func resolveJournal(p *problems, r *rawJournal, j *JournalConfig) {
	field(p, "journal.off", r.Off, &j.Off, nil)
	field(p, "journal.retain", r.Retain, &j.Retain, durationWithin(time.Minute, 10*365*24*time.Hour))
	field(p, "journal.max_bytes", r.MaxBytes, &j.MaxBytes, sizeWithin(0, 1<<40))
	field(p, "journal.response_body", r.ResponseBody, &j.ResponseBody, sizeWithin(1, 64<<10))
	field(p, "journal.bodies", r.Bodies, &j.Bodies, nil)
	list(p, "journal.redact_paths", r.RedactPaths, &j.RedactPaths, checkRedactPath, false)
	if len(j.RedactPaths) == 0 {
		j.RedactPaths = nil // `redact_paths: []` means the same as none
	}
}

func checkRedactPath(s string) error {
	_, err := spool.ParseRedactPath(s)
	return err
}

// journalRestart reports whether a change of the journal's settings needs
// a restart: all but redact_paths, which a reload applies.
func journalRestart(old, new JournalConfig) bool {
	old.RedactPaths, new.RedactPaths = nil, nil
	return !reflect.DeepEqual(old, new)
}
