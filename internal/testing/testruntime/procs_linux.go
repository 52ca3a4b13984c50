package testruntime

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// proc is one process as /proc showed it; start (clock ticks after boot)
// tells it from a later process that got the same PID.
type proc struct {
	pid, ppid int
	state     byte
	start     uint64
	argv      []string
}

func (p proc) String() string { return fmt.Sprintf("pid %d (%s)", p.pid, strings.Join(p.argv, " ")) }

// readProc reads /proc/<pid>/stat and cmdline.
func readProc(pid int) (proc, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return proc{}, err
	}
	// The command name is in parentheses and may hold spaces: the fields
	// that follow start after the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return proc{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 20 {
		return proc{}, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	p := proc{pid: pid, state: f[0][0]}
	if p.ppid, err = strconv.Atoi(f[1]); err != nil {
		return proc{}, fmt.Errorf("/proc/%d/stat: ppid: %w", pid, err)
	}
	if p.start, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return proc{}, fmt.Errorf("/proc/%d/stat: starttime: %w", pid, err)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return proc{}, err
	}
	for _, a := range bytes.Split(bytes.TrimRight(cmdline, "\x00"), []byte{0}) {
		p.argv = append(p.argv, string(a))
	}
	return p, nil
}

// listProcs returns every process of the machine that could be read (ones
// that exit meanwhile are left out).
func listProcs() ([]proc, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var procs []proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, err := readProc(pid); err == nil {
			procs = append(procs, p)
		}
	}
	return procs, nil
}

// shimsOf returns the containerd shims serving the containerd at socket:
// containerd-shim-runc-v2 runs with `-address <socket>` among its arguments.
func shimsOf(procs []proc, socket string) []proc {
	var shims []proc
	for _, p := range procs {
		for i, a := range p.argv {
			if (a == "-address" || a == "--address") && i+1 < len(p.argv) && p.argv[i+1] == socket ||
				a == "-address="+socket || a == "--address="+socket {
				shims = append(shims, p)
				break
			}
		}
	}
	return shims
}

// descendants returns the processes below pid, children before their
// children.
func descendants(procs []proc, pid int) []proc {
	var out []proc
	parents := []int{pid}
	for len(parents) > 0 {
		var next []int
		for _, p := range procs {
			if slices.Contains(parents, p.ppid) {
				out = append(out, p)
				next = append(next, p.pid)
			}
		}
		parents = next
	}
	return out
}

// Processes returns the processes that belong to the containerd listening
// at socket other than containerd itself: its shims and everything below
// them (container processes, runc), found by the shims' -address argument in
// /proc/*/cmdline. Zombies are left out.
func Processes(socket string) ([]int, error) {
	procs, err := listProcs()
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, shim := range shimsOf(procs, socket) {
		for _, p := range append([]proc{shim}, descendants(procs, shim.pid)...) {
			if p.state != 'Z' && !slices.Contains(pids, p.pid) {
				pids = append(pids, p.pid)
			}
		}
	}
	return pids, nil
}

// killProcs sends SIGKILL to each process through a pidfd, after checking
// that the PID still names the process that was listed, and waits up to
// killGrace for all of them to be gone (or zombies of a parent that has not
// reaped them yet).
func killProcs(procs []proc) error {
	var errs []error
	for _, p := range procs {
		fd, err := unix.PidfdOpen(p.pid, 0)
		if errors.Is(err, unix.ESRCH) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("pidfd_open %s: %w", p, err))
			continue
		}
		if now, err := readProc(p.pid); err == nil && now.start == p.start {
			if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
				errs = append(errs, fmt.Errorf("SIGKILL %s: %w", p, err))
			}
		}
		unix.Close(fd)
	}
	deadline := time.Now().Add(killGrace)
	for {
		var left []string
		for _, p := range procs {
			if now, err := readProc(p.pid); err == nil && now.start == p.start && now.state != 'Z' {
				left = append(left, p.String())
			}
		}
		if len(left) == 0 {
			return errors.Join(errs...)
		}
		if time.Now().After(deadline) {
			return errors.Join(append(errs, fmt.Errorf("still running %s after SIGKILL: %s", killGrace, strings.Join(left, "; ")))...)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// killShims kills what is left of the shims serving socket after containerd
// stopped: the processes below each shim first (so none is re-parented away
// from the shim's subreaper while it dies), then the shims.
func killShims(socket string) (killed int, err error) {
	procs, err := listProcs()
	if err != nil {
		return 0, err
	}
	shims := shimsOf(procs, socket)
	var below []proc
	for _, s := range shims {
		below = append(below, descendants(procs, s.pid)...)
	}
	errs := []error{killProcs(below), killProcs(shims)}
	for _, s := range shims {
		if sock := shimSocket(s); sock != "" {
			if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return len(shims) + len(below), errors.Join(errs...)
}

// shimSocketDir is where containerd 1.6's shims listen, whatever the state
// directory: one socket per shim, named by a hash of containerd's address,
// the namespace and the shim's ID. A shim removes it when it exits cleanly,
// not when it is killed.
const shimSocketDir = "/run/containerd/s"

// shimSocket returns the path of a shim's socket, from its -address,
// -namespace and -id arguments, or "" if one is missing.
func shimSocket(shim proc) string {
	args := map[string]string{}
	for i := 0; i+1 < len(shim.argv); i++ {
		switch a := strings.TrimLeft(shim.argv[i], "-"); a {
		case "address", "namespace", "id":
			args[a] = shim.argv[i+1]
		}
	}
	if args["address"] == "" || args["namespace"] == "" || args["id"] == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(filepath.Join(args["address"], args["namespace"], args["id"])))
	return filepath.Join(shimSocketDir, hex.EncodeToString(sum[:]))
}

// Shims returns the PIDs of the shims serving this runtime's containerd
// (one per pod sandbox with containerd's runc v2 shim), to check that
// nothing outlives a pod.
func (r *Runtime) Shims() ([]int, error) {
	procs, err := listProcs()
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, s := range shimsOf(procs, r.socket) {
		pids = append(pids, s.pid)
	}
	return pids, nil
}
