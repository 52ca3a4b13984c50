package testvm

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/evictd/evictd/internal/testing/childproc"
)

// EnvKernel names the guest kernel; without it the newest
// /boot/vmlinuz-*-amd64 (Debian's linux-image-amd64) is used.
const EnvKernel = "EVICTD_VM_KERNEL"

// busybox is the static busybox of Debian's busybox-static: the
// initramfs's only program.
const busybox = "/bin/busybox"

// GuestDir is where the guest sees Result.Dir, the directory it shares
// with the host: the script, its output and its exit code.
const GuestDir = "/run/vm"

// modules are the kernel modules the initramfs loads, with what they
// depend on first: virtio's PCI transport, 9p over virtio (the host's
// root and the shared directory) and overlayfs (a writable root).
var modules = []string{"virtio_pci", "9pnet_virtio", "9p", "overlay", "virtio_net"}

// The guest's network when Options.Forward is set: qemu's user-mode
// network with restrict=on, so the guest reaches nothing but the
// forwarded ports, each a new connection from the host's side to a host
// address (loopback, in the tests).
const (
	// ForwardAddr is the guest's address of every forwarded port.
	ForwardAddr = "10.0.2.100"
	// guestAddr is the guest's own address on that network.
	guestAddr = "10.0.2.15/24"
)

// Options says what guest to boot and what to run in it.
type Options struct {
	// Script is run by /bin/sh as root in the guest, with its working
	// directory Result.Dir (the guest's /run/vm). The guest's root is the
	// host's, read-only, under a writable overlay in memory, with its own
	// /proc, /sys, /dev, /run and the cgroup v2 hierarchy at
	// /sys/fs/cgroup; the host's /tmp is the host's. Its stdout and
	// stderr are Result.Output.
	Script string
	// Env is added to the script's environment (NAME=value).
	Env []string
	// Systemd boots systemd (the host's) as PID 1 into vm.target, which
	// runs the script as vm-script.service (Type=oneshot) and powers off
	// after it, whatever its exit; without it the initramfs runs the
	// script in a chroot and powers off.
	Systemd bool
	// Files are written into the guest's root before it starts, path
	// (absolute) to content, for example units in /etc/systemd/system.
	Files map[string]string
	// MemoryMiB and CPUs size the guest: default 1536 MiB and 2.
	MemoryMiB int
	CPUs      int
	// Timeout bounds the whole run, boot included: default 5 minutes.
	Timeout time.Duration
	// Forward gives the guest a network whose only destinations are
	// these: guest port (at ForwardAddr) to a host address, host:port.
	// Each connection the guest opens runs the host's busybox nc to that
	// address (qemu's guestfwd=...-cmd:). Without it the guest has only
	// its loopback.
	Forward map[int]string
}

// Result is what a guest run left.
type Result struct {
	// Dir is the directory the guest shared (its /run/vm), kept for the
	// test to read what the script wrote there.
	Dir string
	// Output is the script's stdout and stderr.
	Output string
	// ExitCode is the script's exit status.
	ExitCode int
	// Booted is the time from qemu's start to the script's start; Took,
	// to qemu's exit.
	Booted, Took time.Duration
	// ConsolePath is the guest's serial console log.
	ConsolePath string
}

// Run boots a guest in dir (a new, empty directory), runs opts.Script and
// returns when the guest has powered off, or stops qemu by PID at
// opts.Timeout or when ctx ends. An error means the script did not run to
// its end; a script that failed is a Result with its exit code.
func Run(ctx context.Context, dir string, opts Options) (*Result, error) {
	if opts.MemoryMiB == 0 {
		opts.MemoryMiB = 1536
	}
	if opts.CPUs == 0 {
		opts.CPUs = 2
	}
	if opts.Timeout == 0 {
		opts.Timeout = 5 * time.Minute
	}
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return nil, fmt.Errorf("no qemu-system-x86_64 (hack/install-vm.sh installs it): %w", err)
	}
	kernel, kver, err := Kernel()
	if err != nil {
		return nil, err
	}
	shared := filepath.Join(dir, "shared")
	if err := os.MkdirAll(shared, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(shared, "script"), []byte(opts.Script), 0o644); err != nil {
		return nil, err
	}
	initrd := filepath.Join(dir, "initramfs.cpio")
	if err := writeInitramfs(initrd, kver, opts); err != nil {
		return nil, fmt.Errorf("initramfs: %w", err)
	}
	cmdline := "console=ttyS0 panic=-1 loglevel=4"
	if opts.Systemd {
		// vm.target is also made the default target, in case a systemd
		// takes the guest for a container and ignores this line.
		cmdline += " systemd.unified_cgroup_hierarchy=1 systemd.unit=vm.target systemd.show_status=false"
	}
	console := filepath.Join(dir, "console.log")
	nic, err := nicOption(opts.Forward)
	if err != nil {
		return nil, err
	}
	args := []string{
		"-accel", "tcg,thread=multi", "-cpu", "max",
		"-m", strconv.Itoa(opts.MemoryMiB), "-smp", strconv.Itoa(opts.CPUs),
		"-display", "none", "-monitor", "none", "-no-reboot", "-nic", nic,
		"-serial", "file:" + console, // taken whole: no option list
		"-kernel", kernel, "-initrd", initrd, "-append", cmdline,
		"-virtfs", "local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap",
		"-virtfs", "local,path=" + qemuEscape(shared) + ",mount_tag=vm,security_model=none,multidevs=remap",
	}
	start := time.Now()
	p, err := childproc.Start("qemu", qemu, args, filepath.Join(dir, "qemu.log"))
	if err != nil {
		return nil, err
	}
	res := &Result{Dir: shared, ConsolePath: console}
	timer := time.NewTimer(opts.Timeout)
	defer timer.Stop()
	started := filepath.Join(shared, "started")
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-p.Done():
			done = true
		case <-tick.C:
			if res.Booted == 0 {
				if _, err := os.Stat(started); err == nil {
					res.Booted = time.Since(start)
				}
			}
		case <-timer.C:
			return res, errors.Join(fmt.Errorf("the guest did not power off within %s; console:\n%s\nthe script's output so far:\n%s",
				opts.Timeout, childproc.Tail(console, 40), childproc.Tail(filepath.Join(shared, "output"), 60)), p.Stop(time.Second))
		case <-ctx.Done():
			return res, errors.Join(ctx.Err(), p.Stop(time.Second))
		}
	}
	res.Took = time.Since(start)
	out, _ := os.ReadFile(filepath.Join(shared, "output"))
	res.Output = string(out)
	rc, err := os.ReadFile(filepath.Join(shared, "rc"))
	if err != nil {
		return res, fmt.Errorf("the script did not finish (qemu %v); console:\n%s\nqemu: %s", p.ExitError(), childproc.Tail(console, 60), childproc.Tail(filepath.Join(dir, "qemu.log"), 10))
	}
	if res.ExitCode, err = strconv.Atoi(strings.TrimSpace(string(rc))); err != nil {
		return res, fmt.Errorf("the script's exit code %q: %w", rc, err)
	}
	return res, nil
}

// nicOption is qemu's -nic for forward: none without a forward, else a
// restricted user-mode network with one guestfwd per port.
func nicOption(forward map[int]string) (string, error) {
	if len(forward) == 0 {
		return "none", nil
	}
	nic := "user,model=virtio-net-pci,restrict=on"
	for _, port := range slices.Sorted(maps.Keys(forward)) {
		host, hport, err := net.SplitHostPort(forward[port])
		if err != nil || port <= 0 || port > 65535 || strings.ContainsAny(forward[port], ", ") {
			return "", fmt.Errorf("Options.Forward[%d] = %q: want a guest port and a host address host:port", port, forward[port])
		}
		nic += fmt.Sprintf(",guestfwd=tcp:%s:%d-cmd:%s nc %s %s", ForwardAddr, port, busybox, host, hport)
	}
	return nic, nil
}

// Kernel returns the guest kernel's path and release: $EVICTD_VM_KERNEL,
// or the newest of /boot/vmlinuz-*-amd64.
func Kernel() (path, release string, err error) {
	path = os.Getenv(EnvKernel)
	if path == "" {
		found, _ := filepath.Glob("/boot/vmlinuz-*-amd64")
		if len(found) == 0 {
			return "", "", errors.New("no kernel in /boot/vmlinuz-*-amd64 (hack/install-vm.sh installs Debian's linux-image-amd64)")
		}
		sort.Strings(found)
		path = found[len(found)-1]
	}
	release = strings.TrimPrefix(filepath.Base(path), "vmlinuz-")
	if _, err := os.Stat(filepath.Join("/lib/modules", release)); err != nil {
		return "", "", fmt.Errorf("kernel %s: no modules for release %q: %w", path, release, err)
	}
	return path, release, nil
}

// writeInitramfs writes the initramfs: the static busybox, the modules
// the guest needs for its root, in load order, and /init.
func writeInitramfs(path, kver string, opts Options) error {
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return fmt.Errorf("%w (hack/install-vm.sh installs busybox-static)", err)
	}
	if f, err := elf.NewFile(bytes.NewReader(bb)); err != nil {
		return fmt.Errorf("%s: %w", busybox, err)
	} else {
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				return fmt.Errorf("%s is dynamically linked: the initramfs needs busybox-static's", busybox)
			}
		}
	}
	mods, err := moduleFiles(kver)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	c := &cpioWriter{w: f}
	for _, d := range []string{"bin", "dev", "proc", "sys", "host", "up", "newroot", "m", "files"} {
		c.dir(d)
	}
	c.file("bin/busybox", bb)
	c.symlink("bin/sh", "busybox")
	var names []string
	for _, m := range mods {
		data, err := os.ReadFile(m)
		if err != nil {
			return err
		}
		name := filepath.Base(m)
		c.file("m/"+name, data)
		names = append(names, name)
	}
	var files []string
	for i, p := range slices.Sorted(maps.Keys(opts.Files)) {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("file %q: want an absolute path", p)
		}
		staged := "files/" + strconv.Itoa(i)
		c.file(staged, []byte(opts.Files[p]))
		files = append(files, "/"+staged+" "+p)
	}
	c.file("init", []byte(initScript(names, files, opts)))
	return c.close()
}

// moduleFiles returns the module files to load for modules, dependencies
// first, each once, as modprobe would load them for the kernel release.
func moduleFiles(kver string) ([]string, error) {
	seen := map[string]bool{}
	var files []string
	for _, m := range modules {
		out, err := exec.Command("modprobe", "-S", kver, "--show-depends", m).CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("modprobe -S %s --show-depends %s: %v: %s", kver, m, err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			fields := strings.Fields(line)
			if len(fields) < 2 || fields[0] != "insmod" {
				continue // builtin
			}
			if !strings.HasSuffix(fields[1], ".ko") {
				return nil, fmt.Errorf("module %s: busybox's insmod loads uncompressed modules only", fields[1])
			}
			if !seen[fields[1]] {
				seen[fields[1]] = true
				files = append(files, fields[1])
			}
		}
	}
	return files, nil
}

// initScript is the initramfs's /init: the hostname evictd-vm and the
// loopback interface up (no other network), the host's root over 9p, read-only,
// under an overlay on tmpfs as the new root, with fresh /proc, /sys, /dev
// and /run and the shared directory at GuestDir; then either systemd, or
// the script in a chroot followed by a power-off.
func initScript(modules, files []string, opts Options) string {
	var b strings.Builder
	b.WriteString(`#!/bin/sh
export PATH=/bin
bb=/bin/busybox
$bb mount -t proc proc /proc
$bb mount -t sysfs sys /sys
$bb mount -t devtmpfs dev /dev
$bb hostname evictd-vm
$bb ip link set lo up
`)
	for _, m := range modules {
		fmt.Fprintf(&b, "$bb insmod /m/%s || echo \"vm: insmod %s failed\"\n", m, m)
	}
	if len(opts.Forward) > 0 {
		fmt.Fprintf(&b, "$bb ip addr add %s dev eth0 && $bb ip link set eth0 up || echo \"vm: no eth0 for the forwarded ports\"\n", guestAddr)
	}
	fmt.Fprintf(&b, `fail() { echo "vm: $*"; $bb poweroff -f; }
$bb mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,ro host /host || fail "mount the host's root"
$bb mount -t tmpfs -o mode=0755 tmpfs /up
$bb mkdir -p /up/upper /up/work
$bb mount -t overlay -o lowerdir=/host,upperdir=/up/upper,workdir=/up/work overlay /newroot || fail "mount the overlay"
r=/newroot
$bb mount -t proc proc $r/proc
$bb mount -t sysfs sys $r/sys
$bb mount -t devtmpfs dev $r/dev
# This machine's root has a /.dockerenv, from which systemd concludes it
# runs in a container (and then ignores the kernel's command line, among
# other things): the guest is a machine.
$bb rm -f $r/.dockerenv
$bb mount -t tmpfs -o mode=0755 tmpfs $r/run
$bb mkdir -p $r%[1]s
$bb mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 vm $r%[1]s || fail "mount the shared directory"
`, GuestDir)
	for _, f := range files {
		src, dst, _ := strings.Cut(f, " ")
		fmt.Fprintf(&b, "$bb mkdir -p $r%s && $bb cp %s $r%s\n", filepath.Dir(dst), src, dst)
	}
	env := "cd " + GuestDir + "; export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, e := range opts.Env {
		env += "; export " + ShellQuote(e)
	}
	run := fmt.Sprintf(`%s; cat /proc/uptime > %s/started; /bin/sh %s/script > %s/output 2>&1; echo $? > %s/rc; sync`,
		env, GuestDir, GuestDir, GuestDir, GuestDir)
	if opts.Systemd {
		fmt.Fprintf(&b, `$bb mkdir -p $r/etc/systemd/system
$bb cat > $r/etc/systemd/system/vm.target <<'EOF'
[Unit]
Description=evictd's test guest
Requires=basic.target vm-script.service
After=basic.target vm-script.service
AllowIsolate=yes
EOF
$bb cat > $r/etc/systemd/system/vm-script.service <<'EOF'
[Unit]
Description=the test's script
After=basic.target
SuccessAction=poweroff-force
FailureAction=poweroff-force
[Service]
Type=oneshot
TimeoutStartSec=infinity
ExecStart=/bin/sh -c %s
StandardOutput=journal+console
EOF
$bb ln -sf vm.target $r/etc/systemd/system/default.target
# systemd-tmpfiles empties /tmp at boot (tmp.conf's "D /tmp"): the tests'
# binaries and files are there.
$bb mkdir -p $r/etc/tmpfiles.d
: > $r/etc/tmpfiles.d/tmp.conf
exec $bb switch_root $r /lib/systemd/systemd
`, ShellQuote(run))
	} else {
		fmt.Fprintf(&b, `$bb mkdir -p $r/sys/fs/cgroup
$bb mount -t cgroup2 -o nsdelegate cgroup2 $r/sys/fs/cgroup || fail "mount cgroup2"
$bb chroot $r /bin/sh -c %s
$bb sync
$bb poweroff -f
`, ShellQuote(run))
	}
	return b.String()
}

// qemuEscape escapes a value inside a qemu option list, where a comma
// separates options and two stand for one (a test's directory holds its
// name, which may have commas).
func qemuEscape(s string) string { return strings.ReplaceAll(s, ",", ",,") }

// ShellQuote quotes s for sh, in single quotes.
func ShellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
