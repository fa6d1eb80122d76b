package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// agentPID is PERF_AGENT_PID, or the parent (the agent that exec'd this stand-in).
func agentPID() int {
	if n, err := strconv.Atoi(os.Getenv("PERF_AGENT_PID")); err == nil && n > 0 {
		return n
	}
	return os.Getppid()
}

// cpuOf is the on-CPU time, in nanoseconds, of every thread of pid (the first field of each
// /proc/<pid>/task/<tid>/schedstat), or -1 when it cannot be read.
func cpuOf(pid int) int64 {
	tasks, err := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/schedstat")
	if err != nil || len(tasks) == 0 {
		return -1
	}
	var total int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread has just exited
		}
		f, _, _ := strings.Cut(string(b), " ")
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return -1
		}
		total += n
	}
	return total
}
