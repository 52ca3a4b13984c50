package fleet

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the kernel's USER_HZ, the unit of /proc/<pid>/stat's times
// (100 on every Linux architecture Go supports).
const clockTick = 100

// ProcSample is a process's CPU time and memory at one moment.
type ProcSample struct {
	At      time.Time
	CPU     time.Duration // utime + stime
	RSS     int64         // VmRSS, bytes
	RSSAnon int64         // RssAnon, bytes
	RSSFile int64         // RssFile, bytes
}

// ReadProc reads /proc/<pid>/stat and /proc/<pid>/status.
func ReadProc(pid int) (ProcSample, error) {
	s := ProcSample{At: time.Now()}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// The command may hold spaces: fields start after its closing paren.
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return s, fmt.Errorf("/proc/%d/stat: no command", pid)
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 13 {
		return s, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	// utime and stime are fields 14 and 15 of the line, 12 and 13 after
	// the command.
	var ticks int64
	for _, f := range fields[11:13] {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return s, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += v
	}
	s.CPU = time.Duration(ticks) * time.Second / clockTick
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *int64
		switch key {
		case "VmRSS":
			dst = &s.RSS
		case "RssAnon":
			dst = &s.RSSAnon
		case "RssFile":
			dst = &s.RSSFile
		default:
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			return s, fmt.Errorf("/proc/%d/status %s: %w", pid, key, err)
		}
		*dst = kb << 10
	}
	return s, nil
}
