package host

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"

	"github.com/evictd/evictd/signals"
)

// ErrNoProcess is wrapped by PodSignaller.Signal's error when it found no
// process to signal: no container of the pod has a runtime ID and a
// cgroup below the pod's, or none of their processes is visible from
// evictd's PID namespace (a container of evictd's own without the host's
// PID namespace sees only zeros in cgroup.procs).
var ErrNoProcess = errors.New("no container process to signal")

// PodSignaller signals a pod's containers' main processes itself, without
// the container runtime: the node-pressure stop's first signal, sent the
// moment the eviction is decided rather than after a CRI call, a new
// runtime process and its kill(2).
//
// Only the processes of the containers' own cgroups are ever signalled,
// found below the pod's cgroup by the runtime IDs the pod's
// signals.Container.ID gives (the kubelet's status, never a name a tenant
// chooses): never the sandbox's pause process, whose ID no container
// carries, nor a process outside the pod. Of a container's processes only
// its main process gets the signal, as the runtime's own stop sends it:
// the one whose parent is not in the container (the runtime's shim); a
// process its main process left behind, reparented to the shim, counts
// as one too.
//
// Each process is signalled through a pidfd opened on its PID and kept
// only if the container's cgroup still lists that PID once the pidfd is
// open: a PID reused meanwhile by a process elsewhere is left alone, and
// a process that exits after the check is no longer the pidfd's (the
// signal fails with ESRCH instead of reaching a newcomer).
type PodSignaller struct {
	cgroups *cgroups
	proc    procfs.FS
}

// NewPodSignaller signals the processes of the pod cgroups under the
// kubepods cgroup that cfg names, seen through cfg.ProcRoot.
func NewPodSignaller(cfg Config) (*PodSignaller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cg, err := newCgroups(cfg)
	if err != nil {
		return nil, err
	}
	proc, err := procfs.NewFS(cfg.ProcRoot)
	if err != nil {
		return nil, fmt.Errorf("proc root %q: %w", cfg.ProcRoot, err)
	}
	return &PodSignaller{cgroups: cg, proc: proc}, nil
}

// Signalled is what one Signal did.
type Signalled struct {
	// Processes is how many processes got the signal.
	Processes int
	// Containers is how many of the pod's containers with an ID had a
	// cgroup below the pod's.
	Containers int
	// Signals is the signals sent, each once, in the order of the
	// containers first sent it.
	Signals []syscall.Signal
	// FirstAfter is the time from the call's start to its first signal
	// sent (zero when none was). What follows it (the other containers,
	// closing the pidfds, the scheduler giving the CPU to the process
	// just signalled) is not the victim's wait.
	FirstAfter time.Duration
}

// SignalNames names the signals sent, comma-separated, for a log:
// SIGTERM, SIGQUIT, SIGRTMIN+3 (from glibc's SIGRTMIN, 34, as images name
// the real-time signals).
func (s Signalled) SignalNames() string {
	names := make([]string, 0, len(s.Signals))
	for _, sig := range s.Signals {
		name := unix.SignalName(sig)
		switch {
		case name != "":
		case sig >= sigRTMin:
			name = "SIGRTMIN+" + strconv.Itoa(int(sig-sigRTMin))
		default:
			name = strconv.Itoa(int(sig))
		}
		names = append(names, name)
	}
	return strings.Join(names, ",")
}

// sigRTMin is glibc's SIGRTMIN, from which images number the real-time
// signals.
const sigRTMin = 34

// Signal sends sig to the main process of each container of pod (UID,
// QOS and Containers with their IDs set) that has a cgroup below the
// pod's, as PodSignaller says. It returns what it signalled; the error
// joins what failed (a cgroup that does not read, a signal refused). It
// wraps ErrNoProcess when nothing was signalled and nothing failed
// otherwise.
func (s *PodSignaller) Signal(pod signals.Pod, sig syscall.Signal) (Signalled, error) {
	return s.SignalEach(pod, func(signals.Container) syscall.Signal { return sig })
}

// SignalEach is Signal with each container's own signal, sigOf's: the
// stop signal its image or its pod names, which the runtime's own stop
// would send.
func (s *PodSignaller) SignalEach(pod signals.Pod, sigOf func(signals.Container) syscall.Signal) (Signalled, error) {
	var done Signalled
	start := time.Now()
	v, err := s.cgroups.version()
	if err != nil {
		return done, err
	}
	name, err := podCgroupName(s.cgroups.kubepods, pod.QOS, pod.UID)
	if err != nil {
		return done, err
	}
	podDir := s.cgroups.memoryDir(v, name)
	var errs []error
	for _, c := range pod.Containers {
		dir, ok := containerDir(podDir, c.ID)
		if !ok {
			continue
		}
		done.Containers++
		sig := sigOf(c)
		n, first, err := s.signalMain(dir, sig)
		if n > 0 && done.Processes == 0 {
			done.FirstAfter = first.Sub(start)
		}
		done.Processes += n
		if n > 0 && !slices.Contains(done.Signals, sig) {
			done.Signals = append(done.Signals, sig)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("container %s (%s): %w", c.Name, c.ID, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return done, fmt.Errorf("signal pod %s's containers: %w", pod.Ref(), err)
	}
	if done.Processes == 0 {
		return done, fmt.Errorf("signal pod %s: %w (%d of %d containers found in %s)", pod.Ref(), ErrNoProcess, done.Containers, len(pod.Containers), podDir)
	}
	return done, nil
}

// signalMain sends sig to the main processes of the container whose
// cgroup is dir (and those of its descendants, which a container's
// systemd may make): the processes whose parent is not one of them.
// first is when the first of them got it.
func (s *PodSignaller) signalMain(dir string, sig syscall.Signal) (n int, first time.Time, err error) {
	listed, err := procsBelow(dir)
	if err != nil {
		return 0, first, err
	}
	in := map[int]string{}
	for _, p := range listed {
		in[p.pid] = p.dir
	}
	// Every parent is read before any signal: a main process that exits
	// on it orphans its children, which would then look like main
	// processes themselves.
	var errs []error
	var mains []listedProc
	for _, p := range listed {
		st, err := s.proc.Proc(p.pid)
		if err == nil {
			var stat procfs.ProcStat
			if stat, err = st.Stat(); err == nil {
				if _, child := in[stat.PPID]; !child {
					mains = append(mains, p)
				}
				continue
			}
		}
		// Gone since the listing: nothing to signal.
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("process %d: %w", p.pid, err))
		}
	}
	for _, p := range mains {
		ok, err := signalListed(p, sig)
		switch {
		case err != nil:
			errs = append(errs, err)
		case ok:
			if n == 0 {
				first = time.Now()
			}
			n++
		}
	}
	return n, first, errors.Join(errs...)
}

// listedProc is a process a cgroup.procs listed, with the cgroup
// directory that listed it.
type listedProc struct {
	pid int
	dir string
}

// signalListed sends sig to p through a pidfd, if p.dir still lists p's
// PID once the pidfd is open. ok is false when the process has gone or
// the PID now names a process elsewhere.
func signalListed(p listedProc, sig syscall.Signal) (ok bool, err error) {
	fd, err := unix.PidfdOpen(p.pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("pidfd_open %d: %w", p.pid, err)
	}
	defer unix.Close(fd)
	pids, err := procs(p.dir)
	if err != nil {
		return false, err
	}
	if !slices.Contains(pids, p.pid) {
		return false, nil
	}
	switch err := unix.PidfdSendSignal(fd, sig, nil, 0); {
	case errors.Is(err, unix.ESRCH):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("pidfd_send_signal %d %s: %w", p.pid, unix.SignalName(sig), err)
	}
	return true, nil
}

// procsBelow lists the processes of the cgroup dir and of its
// descendants. A descendant that goes while it is walked is skipped.
func procsBelow(dir string) ([]listedProc, error) {
	var out []listedProc
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path != dir && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		pids, err := procs(path)
		if err != nil {
			if path != dir && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		for _, pid := range pids {
			out = append(out, listedProc{pid: pid, dir: path})
		}
		return nil
	})
	return out, err
}

// procs reads the PIDs dir's cgroup.procs lists, leaving out the zeros it
// shows for processes outside the reader's PID namespace.
func procs(dir string) ([]int, error) {
	file := filepath.Join(dir, "cgroup.procs")
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var pids []int
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		pid, err := strconv.Atoi(string(bytes.TrimSpace(sc.Bytes())))
		if err != nil || pid < 0 {
			return nil, fmt.Errorf("%s: %q is not a PID", file, sc.Text())
		}
		if pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}
