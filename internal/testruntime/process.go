package testruntime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// How long containerd gets to exit after SIGTERM, and after SIGKILL.
const (
	termGrace = 10 * time.Second
	killGrace = 5 * time.Second
)

// daemon is a containerd started by this package, its output appended to a
// log file.
type daemon struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed once the process has been waited for
	waitErr error         // cmd.Wait's result, set before done is closed
}

// startDaemon starts bin with args, appending its stdout and stderr to
// logPath after a line naming the command. The kernel kills it if the test
// process dies without stopping it (a panic, `go test -timeout`).
func startDaemon(bin string, args []string, logPath string) (*daemon, error) {
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor
	fmt.Fprintf(logFile, "==== testruntime %s: %s %s\n", time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))

	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	d := &daemon{cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		d.waitErr = cmd.Wait()
		close(d.done)
	}()
	return d, nil
}

func (d *daemon) pid() int { return d.cmd.Process.Pid }

func (d *daemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, then SIGKILL if the process has not exited within
// termGrace, and waits for it to exit. Signals go to this process only, by
// its PID (a pidfd, so never to a reused PID).
func (d *daemon) stop() error {
	if d.exited() {
		return nil
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("SIGTERM containerd (pid %d): %w", d.pid(), err)
	}
	select {
	case <-d.done:
		return nil
	case <-time.After(termGrace):
	}
	if err := d.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("SIGKILL containerd (pid %d): %w", d.pid(), err)
	}
	select {
	case <-d.done:
		return nil
	case <-time.After(killGrace):
		return fmt.Errorf("containerd (pid %d) still running %s after SIGKILL", d.pid(), killGrace)
	}
}

// exitError describes a containerd that exited when it should be running,
// with the end of its log.
func (d *daemon) exitError() error {
	return fmt.Errorf("containerd (pid %d) exited: %v; last lines of %s:\n%s", d.pid(), d.waitErr, d.logPath, tailFile(d.logPath, 30))
}

// runCommand runs a command to completion and returns its standard output;
// its error names the command and carries its output.
func runCommand(name string, args ...string) (string, error) {
	return runCommandContext(context.Background(), nil, name, args...)
}

// runCommandContext is runCommand with a context and an optional standard
// input.
func runCommandContext(ctx context.Context, stdin io.Reader, name string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = stdin
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		out := strings.TrimSpace(stderr.String() + "\n" + stdout.String())
		if len(out) > 4000 {
			out = "…" + out[len(out)-4000:]
		}
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return stdout.String(), nil
}

// tailFile returns at most the last n lines of the file at path (of its last
// 64 KiB), or a note saying why it cannot.
func tailFile(path string, n int) string {
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
