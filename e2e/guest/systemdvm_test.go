package guest

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/testing/testvm"
)

// systemdScript runs in a guest whose PID 1 is systemd, on the unified
// hierarchy: it installs what `make install` staged in $STAGE (the unit
// runs evictd with --config /etc/evictd/config.yaml), overrides some of
// the file's settings with flags in EVICTD_ARGS of evictd.env, as an
// upgraded node's kept evictd.env does, makes kubepods.slice as the
// kubelet's systemd driver does, starts evictd with systemctl, stalls it
// until the watchdog has systemd restart it, stops it, and prints what the
// test checks as name=value lines and the journal.
const systemdScript = `set -u
cp -a "$STAGE"/. /
printf '%s\n' 'EVICTD_ARGS=--root-dir=/var/lib --cgroup-driver=systemd --enforce-node-allocatable=pods --eviction-hard=allocatableMemory.available<100Mi' > /etc/evictd/evictd.env
# The watchdog, shortened for the test; the rest is the unit's own.
mkdir -p /etc/systemd/system/evictd.service.d
printf '[Service]\nWatchdogSec=6s\n' > /etc/systemd/system/evictd.service.d/50-test.conf
systemctl start kubepods.slice
systemctl set-property --runtime kubepods.slice MemoryMax=700M
systemctl daemon-reload
s=$(cut -d' ' -f1 /proc/uptime)
systemctl start evictd.service; rc=$?
e=$(cut -d' ' -f1 /proc/uptime)
echo "start_rc=$rc start_took=$s $e"
if [ "$rc" != 0 ]; then journalctl -u evictd.service --no-pager; exit 1; fi
systemctl show evictd.service -p ActiveState -p SubState -p StatusText
pid=$(systemctl show -p MainPID --value evictd.service)
echo "pid=$pid"
grep -E '^(NoNewPrivs|Seccomp|CapEff|CapBnd):' /proc/$pid/status | tr -d ' \t' | sed 's/:/=/'
echo "cgroup=$(cat /proc/$pid/cgroup)"
d=/sys/fs/cgroup/system.slice/evictd.service
echo "memory.max=$(cat $d/memory.max) memory.min=$(cat $d/memory.min) pids.max=$(cat $d/pids.max)"
echo "readyz=$(busybox wget -q -O - http://127.0.0.1:9847/readyz)"
echo "kubepods.slice memory.max=$(cat /sys/fs/cgroup/kubepods.slice/memory.max)"
# The watchdog: evictd stalled, systemd kills and restarts it.
kill -STOP "$pid"
for i in $(seq 1 150); do
	n=$(systemctl show -p NRestarts --value evictd.service)
	p=$(systemctl show -p MainPID --value evictd.service)
	a=$(systemctl show -p ActiveState --value evictd.service)
	[ "${n:-0}" -ge 1 ] && [ "$p" != "$pid" ] && [ "$p" != 0 ] && [ "$a" = active ] && break
	sleep 0.2
done
echo "after_stall NRestarts=$n MainPID=$p ActiveState=$a"
# A clean stop.
systemctl stop evictd.service
systemctl show evictd.service -p ActiveState -p Result -p ExecMainCode -p ExecMainStatus | tr '\n' ' '; echo
systemd-analyze security evictd.service --no-pager 2>&1 | tail -1
echo "---- journal"
journalctl -u evictd.service --no-pager -o short-monotonic
`

// TestSystemdNode installs evictd with `make install` in a guest whose PID
// 1 is systemd (the host's, 252) on cgroup v2, and checks on a real systemd
// what the unit promises: Type=notify readiness, the unit's sandbox and
// resource settings on the running process and its cgroup, the PSI trigger
// on kubepods.slice's memory.pressure (writable through ReadWritePaths in a
// read-only cgroup mount), the watchdog restarting a stalled evictd, a
// clean stop, and systemd-analyze security's verdict on the running system.
func TestSystemdNode(t *testing.T) {
	testvm.Need(t)
	makeBin, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make on PATH")
	}
	stage := t.TempDir()
	if out, err := exec.Command(makeBin, "-C", filepath.Join("..", ".."), "install", "DESTDIR="+stage).CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	res, err := testvm.Run(t.Context(), t.TempDir(), testvm.Options{
		Systemd:   true,
		Script:    systemdScript,
		Env:       []string{"STAGE=" + stage},
		MemoryMiB: 1536,
		// The guest's whole life, boot included: systemd reached the
		// script in 2m12s once on a machine also running another guest
		// and the rest of the suite (quiet: about 30 s), and the 4
		// minutes it had then did not leave the script its time.
		Timeout: 10 * time.Minute,
	})
	if res != nil {
		t.Logf("guest booted systemd to the script in %s, powered off after %s; the script said:\n%s",
			res.Booted.Round(100*time.Millisecond), res.Took.Round(100*time.Millisecond), res.Output)
	}
	if err != nil {
		t.Fatal(err)
	}
	out := res.Output
	for _, want := range []string{
		"start_rc=0",
		"ActiveState=active", "SubState=running",
		"NoNewPrivs=1", "Seccomp=2",
		// CAP_DAC_READ_SEARCH (2) and CAP_KILL (5), the unit's bounding set.
		"CapBnd=0000000000000024",
		"cgroup=0::/system.slice/evictd.service",
		"memory.max=268435456 memory.min=33554432 pids.max=512",
		"readyz=ok",
		"after_stall NRestarts=1",
		"Result=success", "ExecMainStatus=0",
		"Watchdog timeout",
		`PSI trigger \"some 150000 2000000\" on /sys/fs/cgroup/kubepods.slice/memory.pressure`,
		"memory.events of /sys/fs/cgroup/kubepods.slice",
		// The unit's --config was read, and EVICTD_ARGS overrides it.
		"rootDir in /etc/evictd/config.yaml is overridden by --root-dir.",
		"evictionHard in /etc/evictd/config.yaml is overridden by --eviction-hard.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the guest did not say %q", want)
		}
	}
	// A warning or error about the trigger names its file (the wake-up
	// source failed, no wake-ups): any other warning is not about it (the
	// unit no longer starts the guest's containerd, and evictd warns that
	// the imagefs signals could not be read).
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "kubepods.slice/memory.pressure") &&
			(strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR")) {
			t.Errorf("evictd could not arm the kubepods.slice PSI trigger under the unit: %s", line)
		}
	}
	m := regexp.MustCompile(`Overall exposure level for evictd.service: ([0-9.]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Errorf("no verdict from systemd-analyze security")
	} else {
		t.Logf("systemd-analyze security on the running guest: %s", m[1])
	}
}
