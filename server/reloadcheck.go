package server

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/hookpace/hookpace/config"
)

// A reload must not take a file caught half-written for the operator's
// intent. Editors and kubectl write in steps that leave a file empty or
// cut short for a moment, and a file cut short may still parse, with
// every setting it lost back at its default: no proxy auth, no egress
// rules. So the watch waits for a changed file to settle (the same bytes
// on two polls in a row), an empty file is refused, and so is one that
// would turn off proxy auth or egress rules the running config has
// without naming the setting (`auth: {users: []}` turns auth off; `egress:
// {allow: []}` empties the list).

// settle tells, poll by poll, when a changed file has settled.
type settle struct {
	changed  []byte // what the last poll read, while it differed from the file in force
	settling bool
}

// settled reports whether b, read now, differs from last (the file in
// force) and is what the poll before read too.
func (s *settle) settled(b, last []byte) bool {
	switch {
	case bytes.Equal(b, last):
		s.settling = false
		return false
	case !s.settling || !bytes.Equal(b, s.changed):
		s.changed, s.settling = b, true // still being written, perhaps
		return false
	}
	s.settling = false
	return true
}

// errEmptyConfig refuses a reload of an empty file.
var errEmptyConfig = errors.New("the file is empty (being written?); write the whole config, or `{}` for the defaults")

// vetFile refuses a reload of a file with nothing in it but space.
func vetFile(b []byte) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return errEmptyConfig
	}
	return nil
}

// keepsGuards refuses a reload that would drop old's proxy auth or egress
// rules without new's file naming the setting.
func keepsGuards(old, new *config.Config) error {
	if old == nil {
		return nil
	}
	var errs []error
	drops := func(field string, had, has int) {
		if had > 0 && has == 0 && !new.InFile(field) {
			section, key, _ := strings.Cut(field, ".")
			errs = append(errs, fmt.Errorf("%s: the running config has %d and the new file does not name %s, which would turn them off "+
				"(a file cut short?); to do that, say so: `%s: {%s: []}`", field, had, field, section, key))
		}
	}
	drops("auth.users", len(old.Auth.Users), len(new.Auth.Users))
	drops("egress.allow", len(old.Egress.Allow), len(new.Egress.Allow))
	drops("egress.deny", len(old.Egress.Deny), len(new.Egress.Deny))
	return errors.Join(errs...)
}
