package testvm

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestBootCgroupV2 boots the guest and checks what the tests count on: the
// unified hierarchy with the memory and pids controllers, PSI, the host's
// files, the shared directory both ways, and the script's exit code.
func TestBootCgroupV2(t *testing.T) {
	Need(t)
	marker := t.TempDir() + "/marker"
	if err := os.WriteFile(marker, []byte("from the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Run(t.Context(), t.TempDir(), Options{
		Env: []string{"MARKER=" + marker},
		Script: `set -e
stat -f -c %T /sys/fs/cgroup
cat /sys/fs/cgroup/cgroup.controllers
head -1 /proc/pressure/memory
cat "$MARKER"; echo
echo written-by-guest > ./note
# The slowdown: the same pipe of CPU and memory work as on the host.
s=$(cut -d' ' -f1 /proc/uptime)
dd if=/dev/zero bs=1M count=128 2>/dev/null | md5sum > /dev/null
e=$(cut -d' ' -f1 /proc/uptime)
echo "$s $e" > ./work
exit 3
`,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("booted in %s, powered off after %s", res.Booted.Round(100e6), res.Took.Round(100e6))
	lines := strings.Split(strings.TrimSpace(res.Output), "\n")
	if len(lines) != 4 || lines[0] != "cgroup2fs" || !strings.Contains(lines[1], "memory") || !strings.Contains(lines[1], "pids") ||
		!strings.HasPrefix(lines[2], "some avg10=") || lines[3] != "from the host" {
		t.Errorf("guest printed:\n%s", res.Output)
	}
	if res.ExitCode != 3 {
		t.Errorf("exit code %d, want 3", res.ExitCode)
	}
	if note, err := os.ReadFile(res.Dir + "/note"); err != nil || string(note) != "written-by-guest\n" {
		t.Errorf("the guest's note: %q, %v", note, err)
	}
	// The same work on the host, for the slowdown (logged, not asserted:
	// the machine may be busy).
	var s, e float64
	if work, err := os.ReadFile(res.Dir + "/work"); err != nil {
		t.Errorf("the guest's timing: %v", err)
	} else if _, err := fmt.Sscan(string(work), &s, &e); err != nil {
		t.Errorf("the guest's timing %q: %v", work, err)
	}
	start := time.Now()
	if out, err := exec.Command("/bin/sh", "-c", "dd if=/dev/zero bs=1M count=128 2>/dev/null | md5sum > /dev/null").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	host := time.Since(start)
	guest := time.Duration((e - s) * float64(time.Second))
	t.Logf("128 MiB through dd | md5sum: %s in the guest, %s on the host (%.1f×)", guest.Round(10*time.Millisecond), host.Round(time.Millisecond), guest.Seconds()/host.Seconds())
}

// TestForward checks the guest's only network: two connections in turn to
// a forwarded port reach a server on the host's loopback, and an address
// that is not forwarded is not reached; and a directory whose name has a
// comma.
func TestForward(t *testing.T) {
	Need(t)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hit %d from %s\n", hits.Add(1), r.URL.Path)
	}))
	defer srv.Close()
	// A comma in the guest's directory, as a subtest's name puts there:
	// qemu's option lists must not split the paths at it.
	res, err := Run(t.Context(), filepath.Join(t.TempDir(), "with,comma"), Options{
		Forward: map[int]string{8080: srv.Listener.Addr().String()},
		Script: `busybox wget -q -O - http://` + ForwardAddr + `:8080/one
busybox wget -q -O - http://` + ForwardAddr + `:8080/two
busybox wget -q -T 3 -O - http://10.0.2.2:80/ >/dev/null 2>&1 && echo "outside reached"
exit 0
`,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the guest said:\n%s", res.Output)
	if want := "hit 1 from /one\nhit 2 from /two\n"; res.Output != want {
		t.Errorf("the guest said %q, want %q", res.Output, want)
	}
}
