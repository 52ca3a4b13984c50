package wakeup

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/testing/testalloc"
	"golang.org/x/sys/unix"
)

const unifiedMount = "/sys/fs/cgroup/unified"

// TestPSITriggerArmAndClose writes a real trigger to /proc/pressure/memory
// and to a cgroup v2 cgroup's memory.pressure, runs it and stops it; every
// descriptor and goroutine is released. A real stall cannot be caused on
// purpose here, so the wake-up itself is not tested.
func TestPSITriggerArmAndClose(t *testing.T) {
	requireRoot(t)
	paths := []string{"/proc/pressure/memory"}
	if _, err := os.Stat(filepath.Join(unifiedMount, "memory.pressure")); err == nil {
		paths = append(paths, filepath.Join(testCgroup(t, unifiedMount), "memory.pressure"))
	}
	for _, path := range paths {
		t.Run(path, func(t *testing.T) {
			if _, err := os.Stat(path); err != nil {
				skipOrFail(t, "no PSI: %v", err)
			}
			fds, goroutines := openFDs(t), runtime.NumGoroutine()
			p, err := NewPSITrigger(path, DefaultPSISpec)
			if err != nil {
				t.Fatal(err)
			}
			// arm is what Run does first: the kernel accepts the trigger.
			fd, err := p.arm()
			if err != nil {
				t.Fatalf("arm: %v", err)
			}
			closeFD(t, fd)

			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx, func() {}) }()
			waitFor(t, "the trigger's descriptors", func() bool { return openFDs(t) >= fds+3 }) // file, epoll, stop eventfd
			cancel()
			waitDone(t, done)
			checkNoLeak(t, fds, goroutines)
		})
	}
}

func TestPSITriggerRejected(t *testing.T) {
	if _, err := NewPSITrigger("/proc/pressure/memory", PSISpec{Stall: time.Second, Window: time.Second / 10}); err == nil ||
		!strings.HasPrefix(err.Error(), "/proc/pressure/memory: PSI trigger window 100ms") {
		t.Errorf("got %v, want the window named", err)
	}
	p, err := NewPSITrigger(filepath.Join(t.TempDir(), "memory.pressure"), DefaultPSISpec)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(t.Context(), func() {}); err == nil || !strings.Contains(err.Error(), "memory.pressure") {
		t.Errorf("missing file: got %v, want an error naming it", err)
	}
}

// TestFileEventsReal watches a cgroup v2 cgroup's cgroup.events, which the
// kernel notifies through the same kernfs mechanism as memory.events, and
// moves a child in: "populated 0" becomes "populated 1" and Run wakes.
func TestFileEventsReal(t *testing.T) {
	requireRoot(t)
	if _, err := os.Stat(filepath.Join(unifiedMount, "cgroup.procs")); err != nil {
		skipOrFail(t, "no cgroup v2 hierarchy at %s: %v", unifiedMount, err)
	}
	fds, goroutines := openFDs(t), runtime.NumGoroutine()
	t.Cleanup(func() { checkNoLeak(t, fds, goroutines) })
	dir := testCgroup(t, unifiedMount)
	child := testalloc.Start(t, t, allocEnv, 1)

	f := NewFileEvents(filepath.Join(dir, "cgroup.events"), func(prev, cur []byte) bool { return string(prev) != string(cur) })
	wakes := make(chan struct{}, 16)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx, func() { wakes <- struct{}{} }) }()
	waitFor(t, "the watch", func() bool { return openFDs(t) >= fds+3+3 }) // child's pipes and pidfd; file, epoll, stop eventfd
	child.MoveTo(t, dir)
	waitWake(t, wakes, "cgroup.events changed to populated 1")
	cancel()
	waitDone(t, done)
}

func TestMemoryEventsMissing(t *testing.T) {
	dir := t.TempDir()
	f := NewMemoryEvents(dir)
	if got, want := f.Path(), filepath.Join(dir, "memory.events"); got != want {
		t.Errorf("got path %s, want %s", got, want)
	}
	if err := f.Run(t.Context(), func() {}); err == nil || !strings.Contains(err.Error(), "memory.events") {
		t.Errorf("got %v, want an error naming memory.events", err)
	}
}

// TestPSITriggerUnprivilegedWindow: without CAP_SYS_RESOURCE a 1s window
// is refused, and the error says why, while a multiple of 2s is accepted;
// with it, 1s is accepted. The kernel decides on the credentials that
// opened the file, so with the capability the trigger is armed from a
// thread whose effective set lacks it. A process without it (another
// user, or a root whose bounding set lacks it, as in some containers) runs
// the test again as root of a user namespace of its own, which holds
// every capability: the kernel looks at the bit alone.
func TestPSITriggerUnprivilegedWindow(t *testing.T) {
	const path = "/proc/pressure/memory"
	fi, err := os.Stat(path)
	if err != nil {
		skipOrFail(t, "no PSI on this kernel (%s): %v; it is built without CONFIG_PSI or booted with psi=0", kernelRelease(t), err)
	}
	if perm := fi.Mode().Perm(); perm&0o002 == 0 {
		skipOrFail(t, "%s is %04o on this kernel (%s): unprivileged PSI triggers, and the 2s window asked of a process without CAP_SYS_RESOURCE, came with Linux 6.5, which makes it 0666",
			path, perm, kernelRelease(t))
	}
	arm := func(window time.Duration) error {
		p, err := NewPSITrigger(path, PSISpec{Stall: 100 * time.Millisecond, Window: window})
		if err != nil {
			t.Fatal(err)
		}
		fd, err := p.arm()
		if err == nil {
			closeFD(t, fd)
		}
		return err
	}
	switch {
	case hasSysResource(t):
		if err := arm(time.Second); err != nil {
			t.Errorf("with CAP_SYS_RESOURCE, a 1s window: got %v, want it accepted", err)
		}
	case os.Getenv(envPSIUserNS) != "":
		t.Fatal("in a user namespace of its own, without CAP_SYS_RESOURCE")
	default:
		// Without the capability here (a container's root may lack it),
		// the test runs again where it has it: the kernel looks at the
		// bit alone, which a user namespace's owner holds.
		t.Run("again in a user namespace, with CAP_SYS_RESOURCE", inUserNS)
	}
	withoutSysResource(t, func() {
		if err := arm(time.Second); err == nil || !strings.Contains(err.Error(), "without CAP_SYS_RESOURCE the window must be a multiple of 2s") {
			t.Errorf("without CAP_SYS_RESOURCE, a 1s window: got %v, want it refused with the 2s hint", err)
		}
		if err := arm(2 * time.Second); err != nil {
			t.Errorf("without CAP_SYS_RESOURCE, a 2s window: got %v, want it accepted", err)
		}
	})
}

// envPSIUserNS marks the run of TestPSITriggerUnprivilegedWindow in a
// user namespace.
const envPSIUserNS = "EVICTD_TEST_PSI_IN_USERNS"

// inUserNS runs TestPSITriggerUnprivilegedWindow in a new user namespace,
// as its root: with every capability, CAP_SYS_RESOURCE among them.
func inUserNS(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^TestPSITriggerUnprivilegedWindow$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), envPSIUserNS+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err != nil && !errors.As(err, &exit):
		// What matters ran already; only the check of a process with the
		// capability is left out.
		t.Skipf("cannot make a user namespace here, so a process with CAP_SYS_RESOURCE is not tested: %v", err)
	case err != nil:
		t.Errorf("in a user namespace: %v\n%s", err, out)
	case !strings.Contains(string(out), "--- PASS: TestPSITriggerUnprivilegedWindow"):
		t.Errorf("in a user namespace, the test did not pass:\n%s", out)
	}
}

func kernelRelease(t *testing.T) string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	return "Linux " + unix.ByteSliceToString(u.Release[:])
}

// threadCaps returns the calling thread's capability sets.
func threadCaps(t *testing.T) (*unix.CapUserHeader, *[2]unix.CapUserData) {
	hdr := &unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(hdr, &data[0]); err != nil {
		t.Fatalf("capget: %v", err)
	}
	return hdr, &data
}

const sysResource = uint32(1) << (unix.CAP_SYS_RESOURCE % 32)

func hasSysResource(t *testing.T) bool {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_, data := threadCaps(t)
	return data[unix.CAP_SYS_RESOURCE/32].Effective&sysResource != 0
}

// withoutSysResource runs f on a thread without CAP_SYS_RESOURCE in its
// effective set: capabilities are a thread's, so the test's other threads
// keep theirs, and this one gets it back from its permitted set after f.
// Should that fail, the thread stays locked and dies with the goroutine.
func withoutSysResource(t *testing.T, f func()) {
	runtime.LockOSThread()
	hdr, data := threadCaps(t)
	i := unix.CAP_SYS_RESOURCE / 32
	had := data[i].Effective&sysResource != 0
	if had {
		data[i].Effective &^= sysResource
		if err := unix.Capset(hdr, &data[0]); err != nil {
			runtime.UnlockOSThread()
			t.Fatalf("capset without CAP_SYS_RESOURCE: %v", err)
		}
		if hasSysResource(t) {
			t.Fatal("CAP_SYS_RESOURCE still effective after capset")
		}
	}
	f()
	if had {
		data[i].Effective |= sysResource
		if err := unix.Capset(hdr, &data[0]); err != nil {
			t.Fatalf("capset with CAP_SYS_RESOURCE again: %v", err)
		}
	}
	runtime.UnlockOSThread()
}
