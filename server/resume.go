package server

import (
	"log/slog"

	"github.com/hookpace/hookpace/spool"
)

// logResume says, when hookpace starts on a spool that a previous run left
// webhooks or dead letters in, how many it resumes: after a crash, a
// shutdown that could not drain or hand everything off, or a pod
// rescheduled onto the same volume.
func logResume(log *slog.Logger, u spool.Usage, paused int) {
	if u.Messages == 0 && u.Dead == 0 {
		return
	}
	log.Info("resuming the spool of a previous run", "webhooks", u.Messages, "hosts", u.Hosts,
		"dead_letters", u.Dead, "paused_hosts", paused)
}
