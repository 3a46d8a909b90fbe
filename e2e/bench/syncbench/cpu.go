package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cpuTicksPerSecond is USER_HZ, 100 on every Linux this runs on.
const cpuTicksPerSecond = 100

// cpuByPart reads the CPU time (user + system, seconds) spent so far by this process (the
// policyhub hub controller and the loops' clients run here) and by each process the fleet
// started, grouped into the parts of the fleet. It shows where the machine's cores went during a
// run: policyhub's hub writes load the hub apiserver, while the loops never touch it.
func cpuByPart() (map[string]float64, error) {
	self := os.Getpid()
	out := map[string]float64{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// The command name is in parentheses and may hold spaces; the fields after it are fixed.
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+2:])
		fields := strings.Fields(rest)
		if len(fields) < 15 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		if pid != self && ppid != self {
			continue
		}
		utime, _ := strconv.ParseFloat(fields[11], 64)
		stime, _ := strconv.ParseFloat(fields[12], 64)
		out[partOf(pid, self)] += (utime + stime) / cpuTicksPerSecond
		if pid == self {
			// Children that exited and were waited for: the kubectl processes of the kubectl loop.
			cutime, _ := strconv.ParseFloat(fields[13], 64)
			cstime, _ := strconv.ParseFloat(fields[14], 64)
			out["kubectl"] += (cutime + cstime) / cpuTicksPerSecond
		}
	}
	return out, nil
}

// partOf names the part of the fleet a process is.
func partOf(pid, self int) string {
	if pid == self {
		return "syncbench (hub controller, clients)"
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	args := strings.Split(string(cmdline), "\x00")
	name := filepath.Base(args[0])
	if name == "kube-apiserver" {
		for _, a := range args {
			if a == "--etcd-prefix=/hub" {
				return "hub kube-apiserver"
			}
		}
		return "managed kube-apiservers"
	}
	return name
}

// cpuSince is the CPU time each part spent since before.
func cpuSince(before map[string]float64) (map[string]float64, error) {
	now, err := cpuByPart()
	if err != nil {
		return nil, err
	}
	for part, v := range before {
		now[part] -= v
	}
	return now, nil
}
