package childproc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// KillGrace is how long a process gets to exit after SIGKILL.
const KillGrace = 5 * time.Second

// Process is one child daemon, with its output appended to a log file.
type Process struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed once the process has been waited for
	waitErr error         // cmd.Wait's result, set before done is closed
}

// Start starts bin with args, appending its stdout and stderr to logPath
// after a line naming the command. The kernel kills the child if the test
// process dies without stopping it (a panic, `go test -timeout`).
func Start(name, bin string, args []string, logPath string) (*Process, error) {
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor
	fmt.Fprintf(logFile, "==== %s %s: %s %s\n", name, time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))

	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// PID returns the process ID.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited and been waited for.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM, then SIGKILL if the process has not exited within
// termGrace, and waits for it to exit. Signals go to this process only, by
// its PID (a pidfd where the kernel has them, so never to a reused PID).
func (p *Process) Stop(termGrace time.Duration) error {
	if p.Exited() {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("SIGTERM %s (pid %d): %w", p.Name, p.PID(), err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(termGrace):
	}
	return p.Kill()
}

// ExitError describes a process that exited when it should be running, with
// the end of its log.
func (p *Process) ExitError() error {
	return fmt.Errorf("%s (pid %d) exited: %v; last lines of %s:\n%s", p.Name, p.PID(), p.waitErr, p.LogPath, Tail(p.LogPath, 30))
}

// LogContains reports whether the process's log holds s.
func (p *Process) LogContains(s string) bool {
	b, err := os.ReadFile(p.LogPath)
	return err == nil && bytes.Contains(b, []byte(s))
}

// Tail returns at most the last n lines of the file at path (of its last
// 64 KiB), or a note saying why it cannot.
func Tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	defer f.Close()
	const window = 64 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > window {
		if _, err := f.Seek(-window, io.SeekEnd); err != nil {
			return fmt.Sprintf("(%v)", err)
		}
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Kill sends SIGKILL by PID, as `kill -9` or the OOM killer would, and
// waits for the process to exit.
func (p *Process) Kill() error {
	if p.Exited() {
		return nil
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("SIGKILL %s (pid %d): %w", p.Name, p.PID(), err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(KillGrace):
		return fmt.Errorf("%s (pid %d) still running %s after SIGKILL", p.Name, p.PID(), KillGrace)
	}
}
