package host

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/testing/testagent"
	"github.com/evictd/evictd/internal/testing/testruntime"
)

// doctorCheck is one check of `evictd doctor -o json`'s report.
type doctorCheck struct {
	Name, Status, Message, Fix string
}

// runDoctor runs the binary's doctor with args and decodes its report.
func runDoctor(t *testing.T, args ...string) (map[string]doctorCheck, int) {
	t.Helper()
	out, errOut, code := testagent.Run(t, append([]string{"doctor", "-o", "json"}, args...)...)
	var r struct {
		Checks []doctorCheck
		Failed int
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("doctor: exit %d, stdout is no report: %v\n%s\n%s", code, err, out, errOut)
	}
	byName := map[string]doctorCheck{}
	for _, c := range r.Checks {
		byName[c.Name] = c
	}
	return byName, code
}

// TestDoctorOnThisHost runs `evictd doctor` against a real containerd
// and this machine's cgroup v1 memory hierarchy, in a cgroup root of the
// test's own holding a real kubepods cgroup: every node check passes
// with the kubelet's driver (cgroupfs here), and the systemd driver is a
// failure naming cgroupfs. check-config, with the same runtime, checks the
// image filesystem's capacities as the agent would.
func TestDoctorOnThisHost(t *testing.T) {
	const memory = "/sys/fs/cgroup/memory"
	if _, err := os.Stat(filepath.Join(memory, "memory.usage_in_bytes")); err != nil {
		t.Skip("needs the cgroup v1 memory controller at " + memory)
	}
	rt := testruntime.StartForTest(t, testruntime.Options{Root: t.TempDir()})
	// A runtime just started may answer ImageFsInfo with no filesystem
	// until its first stats collection: a node's runtime has long had it.
	var fsErr string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		fs, err := rt.ImageService().ImageFsInfo(t.Context())
		if err == nil && len(fs.GetImageFilesystems()) > 0 && fs.GetImageFilesystems()[0].GetFsId().GetMountpoint() != "" {
			break
		}
		fsErr = fmt.Sprintf("%v %v", fs, err)
		if time.Now().After(deadline) {
			t.Fatalf("the runtime reports no image filesystem: %s", fsErr)
		}
	}

	// A slice-named root, so that the systemd driver can name it too.
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	root := "/evictddoctor" + hex.EncodeToString(b) + ".slice"
	kubepods := filepath.Join(memory, root, "kubepods")
	if err := os.MkdirAll(kubepods, 0o755); err != nil {
		t.Fatalf("create a kubepods cgroup: %v", err)
	}
	t.Cleanup(func() {
		for _, d := range []string{kubepods, filepath.Dir(kubepods)} {
			if err := syscall.Rmdir(d); err != nil {
				t.Errorf("remove cgroup %s: %v", d, err)
			}
		}
	})
	args := []string{"--hostname-override=n1", "--container-runtime-endpoint=" + rt.Endpoint(), "--cgroup-root=" + root,
		"--state-dir=" + filepath.Join(t.TempDir(), "state"), "--runtime-request-timeout=10s"}

	checks, code := runDoctor(t, args...)
	if code != 0 {
		t.Errorf("doctor: exit %d, want 0: %+v", code, checks)
	}
	for name, want := range map[string]string{
		"container runtime":  rt.Endpoint() + " answers: containerd ",
		"image filesystem":   "ImageFsInfo: images on ",
		"pod sandboxes":      "ListPodSandbox: 0 sandbox(es)",
		"cgroup driver":      kubepods + " exists",
		"PSI":                "/proc/pressure/memory is readable",
		"memcg notification": "takes memory threshold notifications",
		"state directory":    "does not exist yet; the agent creates it",
		"API server":         "no --kubeconfig",
	} {
		c, ok := checks[name]
		if !ok || !strings.Contains(c.Message, want) {
			t.Errorf("%s: %+v, want a message with %q", name, c, want)
			continue
		}
		wantStatus := "ok"
		if name == "API server" {
			wantStatus = "skip"
		}
		if c.Status != wantStatus {
			t.Errorf("%s: status %s, want %s: %s", name, c.Status, wantStatus, c.Message)
		}
	}

	// check-config asks the same runtime for the image filesystem, as
	// the agent does: its capacities are checked too.
	out, errOut, code := testagent.Run(t, "check-config", "-o", "json", "--hostname-override=n1", "--container-runtime-endpoint="+rt.Endpoint(), "--runtime-request-timeout=10s")
	var doc struct {
		Capacity []struct {
			Signal  string
			Checked bool
			Reason  string
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 {
		t.Fatalf("check-config: exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	seen := 0
	for _, c := range doc.Capacity {
		if strings.HasPrefix(c.Signal, "imagefs.") || strings.HasPrefix(c.Signal, "containerfs.") {
			seen++
			if !c.Checked {
				t.Errorf("check-config: %s not checked with the runtime there: %s", c.Signal, c.Reason)
			}
		}
	}
	if seen != 4 {
		t.Errorf("check-config: %d imagefs and containerfs capacities, want 4 (the default thresholds): %+v", seen, doc.Capacity)
	}

	checks, code = runDoctor(t, append(args, "--cgroup-driver=systemd")...)
	if c := checks["cgroup driver"]; code != 1 || c.Status != "fail" || !strings.Contains(c.Message, kubepods+" does") || c.Fix != "set --cgroup-driver=cgroupfs, the kubelet's cgroupDriver" {
		t.Errorf("systemd driver: exit %d, %+v; want exit 1 and a failure naming %s and cgroupfs", code, c, kubepods)
	}
}
