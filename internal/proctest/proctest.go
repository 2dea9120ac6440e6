// Package proctest makes the processes tests start die with the test
// process: a test that hangs and is killed (go test -timeout, a CI job
// cancelled) runs no cleanup, and without this its redis-server, etcd or
// hookpace would keep running and holding their ports.
package proctest

import "os/exec"

// Command is exec.Command for a process a test starts, made to die with
// the test process (DieWithParent).
func Command(name string, arg ...string) *exec.Cmd {
	cmd := exec.Command(name, arg...)
	DieWithParent(cmd)
	return cmd
}

// DieWithParent makes cmd, not started yet, receive SIGKILL when the
// process that starts it exits (Linux: Pdeathsig; elsewhere it does
// nothing). The signal is tied to the OS thread that starts cmd, which
// Go ends only under a goroutine that exits while locked to it
// (runtime.LockOSThread): start processes from ordinary goroutines.
// Whoever starts cmd still kills it and waits for it when the test ends.
func DieWithParent(cmd *exec.Cmd) { dieWithParent(cmd) }
