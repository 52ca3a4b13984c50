package testnode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/evictd/evictd/internal/testing/childproc"
)

// SetEvictdUnit makes the next StartEvictd have systemd run evictd as the
// transient service unit (for example "evictd-e2e.service") instead of a
// child process of the test: Type=notify, Restart=always with
// RestartSec=1s, its output appended to LogPath("evictd"), so that when
// evictd dies systemd, not the test, starts it again with the same flags,
// as evictd's own unit has it. It needs systemd as PID 1 (a test guest
// booted with testvm's Options.Systemd). "" goes back to a child process.
func (n *Node) SetEvictdUnit(unit string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.evUnit = unit
}

// startEvictdUnit starts n.evArgs under systemd as n.evUnit, without
// waiting for it: through a wrapper that first appends a line naming the
// command to the log, as childproc does, at each of systemd's starts, and
// then executes evictd, which stays the unit's main process.
func (n *Node) startEvictdUnit() error {
	wrapper := filepath.Join(n.dir, "evictd-unit")
	script := "#!/bin/sh\necho \"==== evictd $(date -Ins): systemd unit " + n.evUnit + ": " + n.evictdBin + " $*\"\nexec '" + n.evictdBin + "' \"$@\"\n"
	if strings.Contains(n.evictdBin, "'") {
		return fmt.Errorf("evictd binary %q: a quote in its path", n.evictdBin)
	}
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		return err
	}
	log := n.logPath("evictd")
	args := []string{
		"--unit=" + n.evUnit, "--no-block", "--collect", "--quiet",
		"--service-type=notify", "-p", "NotifyAccess=main",
		"-p", "Restart=always", "-p", "RestartSec=1s",
		"-p", "TimeoutStopSec=" + strconv.Itoa(int(termGrace.Seconds())),
		"-p", "StandardOutput=append:" + log, "-p", "StandardError=append:" + log,
		"--", "/bin/sh", wrapper,
	}
	if out, err := exec.Command("systemd-run", append(args, n.evArgs...)...).CombinedOutput(); err != nil {
		return fmt.Errorf("systemd-run %s: %w: %s", n.evUnit, err, out)
	}
	n.evUnitUp = true
	return nil
}

// stopEvictdUnit stops the unit StartEvictd started, as `systemctl stop`
// does (SIGTERM, SIGKILL after termGrace); systemd then forgets it.
func (n *Node) stopEvictdUnit() error {
	if !n.evUnitUp {
		return nil
	}
	n.evUnitUp = false
	out, err := exec.Command("systemctl", "stop", n.evUnit).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "not loaded") {
		return fmt.Errorf("systemctl stop %s: %w: %s", n.evUnit, err, out)
	}
	return nil
}

// unitMainPID returns the unit's main process ID, 0 when it has none (it
// is not running, or between systemd's restarts).
func (n *Node) unitMainPID() int {
	if !n.evUnitUp {
		return 0
	}
	out, err := exec.Command("systemctl", "show", "-p", "MainPID", "--value", n.evUnit).Output()
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return pid
}

// killEvictdUnit sends SIGKILL to the unit's main process, as `kill -9`
// would, and waits until systemd has seen it die; systemd then starts the
// unit again, RestartSec later.
func (n *Node) killEvictdUnit() error {
	pid := n.unitMainPID()
	if pid == 0 {
		return fmt.Errorf("evictd's unit %s has no main process to kill", n.evUnit)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("SIGKILL evictd (unit %s, pid %d): %w", n.evUnit, pid, err)
	}
	deadline := time.Now().Add(childproc.KillGrace)
	for n.unitMainPID() == pid {
		if time.Now().After(deadline) {
			return fmt.Errorf("evictd (unit %s, pid %d) still its main process %s after SIGKILL", n.evUnit, pid, childproc.KillGrace)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}
