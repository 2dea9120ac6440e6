package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is USER_HZ, the unit of the CPU times in /proc/PID/stat; it is
// 100 on every Linux architecture Go builds for.
const clockTick = 10 * time.Millisecond

type procStat struct {
	ppid int
	cpu  time.Duration // utime+stime+cutime+cstime
}

// readStat parses /proc/PID/stat. The command name is in parentheses and
// may hold spaces, so the fields are counted from the last ')'.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("reading /proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] state, f[1] ppid, f[11..14] utime stime cutime cstime.
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("reading /proc/%d/stat: %d fields", pid, len(f))
	}
	var st procStat
	st.ppid, _ = strconv.Atoi(f[1])
	for _, x := range f[11:15] {
		n, _ := strconv.ParseInt(x, 10, 64)
		st.cpu += time.Duration(n) * clockTick
	}
	return st, nil
}

// treeCPU is the CPU time used so far by the processes roots and every live
// descendant of theirs. A process's cutime and cstime hold its children that
// have exited and been waited for, which are no longer in /proc, so adding
// all four fields of every live process counts each CPU second once.
func treeCPU(roots []int) time.Duration {
	ents, _ := os.ReadDir("/proc")
	all := map[int]procStat{}
	kids := map[int][]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil {
			continue
		}
		all[pid] = st
		kids[st.ppid] = append(kids[st.ppid], pid)
	}
	var total time.Duration
	seen := map[int]bool{}
	stack := append([]int(nil), roots...)
	for len(stack) > 0 {
		pid := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		total += all[pid].cpu
		stack = append(stack, kids[pid]...)
	}
	return total
}
