// Package testalloc turns a test binary into a child that holds an exact
// amount of memory, so tests can charge N MiB to a real cgroup.
package testalloc

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"

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
