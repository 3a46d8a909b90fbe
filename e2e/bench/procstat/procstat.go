// Package procstat reads what a benchmark needs to know about local processes from /proc: CPU
// time, resident memory, command line and parent. Linux only; benchmarks of the local fleet use
// it to say which process spent the machine's cores and memory.
package procstat

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ticksPerSecond is USER_HZ, 100 on every Linux this runs on.
const ticksPerSecond = 100

// Stat is one process's counters at one moment.
type Stat struct {
	PID, PPID int
	// CPU is the CPU time (user + system) the process has spent so far, in seconds; its children
	// are not included.
	CPU float64
	// RSS is the resident memory in bytes (VmRSS).
	RSS int64
}

// Read reads the counters of process pid.
func Read(pid int) (Stat, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return Stat{}, err
	}
	// The command name is in parentheses and may hold spaces; the fields after it are fixed.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 || i+2 > len(data) {
		return Stat{}, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, data)
	}
	fields := strings.Fields(string(data[i+2:]))
	if len(fields) < 13 {
		return Stat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	s := Stat{PID: pid}
	s.PPID, _ = strconv.Atoi(fields[1])
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	s.CPU = (utime + stime) / ticksPerSecond
	s.RSS, err = rss(pid)
	return s, err
}

// rss is VmRSS of /proc/<pid>/status in bytes (0 for a zombie, which has none).
func rss(pid int) (int64, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest) // "123456 kB"
			if len(f) < 1 {
				break
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status VmRSS: %w", pid, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, nil
}

// Cmdline is the process's arguments, the program first.
func Cmdline(pid int) []string {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || len(data) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")
}

// Children lists the processes whose parent is pid (e.g. everything a local fleet started from
// the calling process).
func Children(pid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		s, err := Read(child)
		if err != nil {
			continue // gone meanwhile
		}
		if s.PPID == pid {
			out = append(out, child)
		}
	}
	return out, nil
}

// Group is a set of processes measured together under one name (e.g. "managed kube-apiservers").
type Group struct {
	Name string
	PIDs []int
}

// Totals are a group's counters summed over its processes.
type Totals struct {
	CPU float64 // seconds
	RSS int64   // bytes
}

// Sum reads every process of the groups and sums their counters by group name. A process that
// has exited counts nothing.
func Sum(groups []Group) map[string]Totals {
	out := map[string]Totals{}
	for _, g := range groups {
		t := out[g.Name]
		for _, pid := range g.PIDs {
			s, err := Read(pid)
			if err != nil {
				continue
			}
			t.CPU += s.CPU
			t.RSS += s.RSS
		}
		out[g.Name] = t
	}
	return out
}
