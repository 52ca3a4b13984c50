// Package testalloc turns a test binary into a child that holds an exact
// amount of memory (Hold, the child's side), and starts and drives such
// children (Start, the parent's side), so tests can charge N MiB to a real
// cgroup.
package testalloc

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// Hold is the child's whole life: it checks that mib (the value of the
// environment variable env) is a whole number from 1 to max, prints
// "waiting", and on a line on stdin maps and faults in that many MiB of
// anonymous memory, prints "ready", and holds it until stdin closes or it is
// killed. It returns the exit code.
//
// Waiting for the parent first lets the parent move the child into the pod
// cgroup only after the Go runtime has started, so the runtime's own
// start-up memory is not charged to the pod. MAP_POPULATE has the kernel
// fault in every page without Go code touching it: under -race each
// instrumented write would also touch the detector's shadow memory and the
// child would hold about twice n MiB.
func Hold(env, mib string, max int) int {
	n, err := strconv.Atoi(mib)
	if err != nil || n <= 0 || n > max {
		fmt.Fprintf(os.Stderr, "%s=%q: want 1..%d\n", env, mib, max)
		return 2
	}
	fmt.Println("waiting")
	in := bufio.NewReader(os.Stdin)
	if _, err := in.ReadString('\n'); err != nil {
		return 2
	}
	buf, err := unix.Mmap(-1, 0, n<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		fmt.Fprintf(os.Stderr, "mmap %d MiB: %v\n", n, err)
		return 2
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, in)
	_ = unix.Munmap(buf)
	return 0
}

// Child is a running Hold child: the test binary started again with env set.
type Child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Reader
	once   sync.Once
	killed atomic.Bool
}

// Start starts the test binary (os.Args[0], running no test) as a Hold
// child of mib MiB, through the environment variable env that the test's
// TestMain hands to Hold, and returns once it waits for Allocate. The child
// is killed and reaped when top ends, if it has not been killed before; t
// is the test that fails if it cannot start.
func Start(t, top testing.TB, env string, mib int) *Child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", env, mib))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &Child{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	top.Cleanup(c.Kill)
	c.expect(t, "waiting")
	return c
}

// PID returns the child's process ID.
func (c *Child) PID() int { return c.cmd.Process.Pid }

// MoveTo puts the child in the cgroup directory dir (its cgroup.procs).
func (c *Child) MoveTo(t testing.TB, dir string) {
	t.Helper()
	p := filepath.Join(dir, "cgroup.procs")
	if err := os.WriteFile(p, []byte(strconv.Itoa(c.PID())), 0o644); err != nil {
		t.Fatalf("move child %d into %s: %v", c.PID(), dir, err)
	}
}

// Allocate tells the child to allocate and returns once its memory is
// faulted in, so charged to its cgroup, or once the child has been killed
// with Kill meanwhile (its pod evicted while the memory was coming in).
func (c *Child) Allocate(t testing.TB) {
	t.Helper()
	if _, err := io.WriteString(c.stdin, "go\n"); err != nil {
		if c.killed.Load() {
			return
		}
		t.Fatalf("tell child %d to allocate: %v", c.PID(), err)
	}
	if line, err := c.out.ReadString('\n'); err != nil || line != "ready\n" {
		if c.killed.Load() {
			return
		}
		t.Fatalf("child %d: got %q, %v; want ready", c.PID(), line, err)
	}
}

// TryAllocate is Allocate for a child the kernel may kill meanwhile (an
// OOM kill in its cgroup): it returns the error instead of failing a test.
func (c *Child) TryAllocate() error {
	if _, err := io.WriteString(c.stdin, "go\n"); err != nil {
		return fmt.Errorf("tell child %d to allocate: %w", c.PID(), err)
	}
	if line, err := c.out.ReadString('\n'); err != nil || line != "ready\n" {
		return fmt.Errorf("child %d: got %q, %v; want ready", c.PID(), line, err)
	}
	return nil
}

// Kill kills the child by PID and waits until it has exited, so its memory
// is uncharged when Kill returns. It is safe to call more than once and
// from any goroutine.
func (c *Child) Kill() {
	c.once.Do(func() {
		c.killed.Store(true)
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait()
	})
}

// expect reads the child's next line.
func (c *Child) expect(t testing.TB, want string) {
	t.Helper()
	line, err := c.out.ReadString('\n')
	if err != nil || line != want+"\n" {
		t.Fatalf("child %d: got %q, %v; want %s", c.PID(), line, err, want)
	}
}
