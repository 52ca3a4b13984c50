package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	evictdagent "github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/config"
	"github.com/evictd/evictd/internal/cri"
	"github.com/evictd/evictd/signals/host"
)

const doctorHelp = `Usage: evictd doctor [flags] [-o text|json]

Check, on the node and with the agent's own flags, what the agent needs
before it is rolled out: the container runtime's socket (it answers
Version, ImageFsInfo and ListPodSandbox), --cgroup-driver against the
pods' cgroup on disk (kubepods for cgroupfs, kubepods.slice for systemd,
under --cgroup-mount and --cgroup-root; cgroup v1 or v2), PSI
(--proc-root/pressure), memory.events (cgroup v2) or memcg notifications
(v1), that --state-dir is writable, and with --kubeconfig the API server
(/version and the node object) and each permission the agent needs, by a
SelfSubjectAccessReview of its own identity. Each check prints ok, warn,
fail or skip, and what to do. Without --kubeconfig (standalone) the API
checks are skipped, saying why.

Exit codes: 0 no check failed (warnings allowed); 1 a check failed; 2 a
usage error. The other flags are the agent's.
`

// checkStatus is a preflight check's result.
type checkStatus string

const (
	statusOK   checkStatus = "ok"
	statusWarn checkStatus = "warn"
	statusFail checkStatus = "fail"
	// statusSkip: not checked, Message says why.
	statusSkip checkStatus = "skip"
)

// apiTimeout bounds each request doctor makes to the API server.
const apiTimeout = 10 * time.Second

// check is one line of doctor's report.
type check struct {
	Name    string      `json:"name"`
	Status  checkStatus `json:"status"`
	Message string      `json:"message"`
	// Fix says what to do, for warn and fail.
	Fix string `json:"fix,omitempty"`
}

// doctorReport is what `evictd doctor -o json` prints.
type doctorReport struct {
	Checks []check `json:"checks"`
	// Failed counts the checks that failed: the exit code is 1 when it
	// is not 0.
	Failed int `json:"failed"`
}

// doctor runs every check with the agent's flags and prints the report.
func doctor(args []string, stdout, stderr io.Writer) int {
	var output string
	cfg, code, ok := loadConfig("evictd doctor", doctorHelp, args, stdout, stderr, func(fs *pflag.FlagSet) {
		fs.StringVarP(&output, "output", "o", "text", "Output format: text or json.")
	})
	if !ok {
		return code
	}
	if output != "text" && output != "json" {
		return usageError(stderr, "evictd doctor", fmt.Errorf("-o: invalid value %q: want text or json", output))
	}
	ctx := context.Background()
	var checks []check
	checks = append(checks, runtimeChecks(ctx, cfg)...)
	checks = append(checks, hostChecks(cfg)...)
	checks = append(checks, apiChecks(ctx, cfg)...)
	r := doctorReport{Checks: checks}
	for _, c := range checks {
		if c.Status == statusFail {
			r.Failed++
		}
	}
	if err := writeReport(stdout, output, r); err != nil {
		fmt.Fprintf(stderr, "evictd doctor: %v\n", err)
		return 1
	}
	if r.Failed > 0 {
		fmt.Fprintf(stderr, "evictd doctor: %d check(s) failed\n", r.Failed)
		return 1
	}
	return 0
}

// writeReport writes r as a line per check (and its fix), or as JSON.
func writeReport(w io.Writer, format string, r doctorReport) error {
	if format == "json" {
		return writeJSON(w, r)
	}
	for _, c := range r.Checks {
		textf(w, "%-4s  %s: %s\n", string(c.Status), c.Name, c.Message)
		if c.Fix != "" {
			textf(w, "      fix: %s\n", c.Fix)
		}
	}
	return nil
}

// runtimeChecks connects to the runtime as the agent does (internal/cri:
// Version and ImageFsInfo), then asks for its version, image filesystem
// and pod sandboxes.
func runtimeChecks(ctx context.Context, cfg *config.Config) []check {
	const name = "container runtime"
	endpoints := cfg.ContainerRuntimeEndpoint
	if cfg.ImageServiceEndpoint != cfg.ContainerRuntimeEndpoint {
		endpoints += " and " + cfg.ImageServiceEndpoint
	}
	c, err := cri.Dial(ctx, cfg.ContainerRuntimeEndpoint, cfg.ImageServiceEndpoint, cfg.RuntimeRequestTimeout, nil)
	if err != nil {
		return []check{{Name: name, Status: statusFail, Message: fmt.Sprintf("cannot use %s: %v", endpoints, err),
			Fix: "start the container runtime, or set --container-runtime-endpoint (and --image-service-endpoint) to its socket: containerd's is unix:///run/containerd/containerd.sock, CRI-O's unix:///var/run/crio/crio.sock"}}
	}
	defer c.Close()
	out := []check{}
	if v, err := c.RuntimeService().Version(ctx); err != nil {
		out = append(out, check{Name: name, Status: statusFail, Message: fmt.Sprintf("%s: Version: %v", cfg.ContainerRuntimeEndpoint, err),
			Fix: "check the runtime's log: it accepted the connection but does not answer"})
	} else {
		out = append(out, check{Name: name, Status: statusOK, Message: fmt.Sprintf("%s answers: %s %s, CRI %s",
			cfg.ContainerRuntimeEndpoint, v.GetRuntimeName(), v.GetRuntimeVersion(), v.GetRuntimeApiVersion())})
	}
	if fsi, err := c.Filesystems(ctx); err != nil {
		out = append(out, check{Name: "image filesystem", Status: statusFail, Message: fmt.Sprintf("ImageFsInfo: %v", err),
			Fix: "the agent observes imagefs.* through ImageFsInfo: check the runtime's snapshotter, or set --imagefs-path"})
	} else {
		msg := "ImageFsInfo: images on " + fsi.ImageMountpoint()
		if fsi.Split() {
			msg += ", writable layers on " + fsi.ContainerMountpoint()
		}
		out = append(out, check{Name: "image filesystem", Status: statusOK, Message: msg})
	}
	if sbs, err := c.RuntimeService().ListPodSandbox(ctx, nil); err != nil {
		out = append(out, check{Name: "pod sandboxes", Status: statusFail, Message: fmt.Sprintf("ListPodSandbox: %v", err),
			Fix: "the agent reads the pods' sandboxes to stop them and measure their disk use: check the runtime's CRI plugin"})
	} else {
		out = append(out, check{Name: "pod sandboxes", Status: statusOK, Message: fmt.Sprintf("ListPodSandbox: %d sandbox(es)", len(sbs))})
	}
	return out
}

// hostChecks checks the node's files: the cgroup driver, PSI, memory
// events or notifications, and the state directory.
func hostChecks(cfg *config.Config) []check {
	hc := evictdagent.HostConfig(cfg)
	out := []check{driverCheck(hc)}
	out = append(out, psiCheck(cfg.ProcRoot, usesStall(cfg)))
	out = append(out, memoryEventsCheck(hc, cfg.KernelMemcgNotification))
	return append(out, stateDirCheck(cfg.StateDir))
}

func driverCheck(hc host.Config) check {
	const name = "cgroup driver"
	f, err := findKubepods(hc)
	if err != nil {
		return check{Name: name, Status: statusFail, Message: fmt.Sprintf("cannot read the memory cgroups under --cgroup-mount %s: %v", hc.CgroupMount, err),
			Fix: "set --cgroup-mount to the cgroup filesystem's mount (/sys/fs/cgroup), with the memory controller"}
	}
	status, msg := f.verdict()
	c := check{Name: name, Status: status, Message: msg}
	switch status {
	case statusFail:
		c.Fix = fmt.Sprintf("set --cgroup-driver=%s, the kubelet's cgroupDriver", f.Other)
	case statusWarn:
		c.Fix = "run doctor again once the kubelet runs; or set --cgroup-root and --cgroup-driver to the kubelet's cgroupRoot and cgroupDriver"
	}
	return c
}

// usesStall reports whether a threshold watches a memory stall signal,
// which needs PSI.
func usesStall(cfg *config.Config) bool {
	for _, th := range cfg.Thresholds {
		if th.Signal.Stall() {
			return true
		}
	}
	return false
}

// psiCheck looks for PSI's memory file under procRoot: the
// memory.pressure.* signals read it, and the agent's stall corroboration
// and wake-ups use it. Without it a stall threshold is a failure; without
// one, a warning.
func psiCheck(procRoot string, stall bool) check {
	const name = "PSI"
	file := filepath.Join(procRoot, "pressure", "memory")
	b, err := os.ReadFile(file)
	if err == nil && strings.HasPrefix(string(b), "some ") {
		return check{Name: name, Status: statusOK, Message: file + " is readable"}
	}
	why := fmt.Sprintf("%s is not readable: %v", file, err)
	if err == nil {
		why = fmt.Sprintf("%s does not hold PSI averages (%q)", file, firstLine(string(b)))
	}
	c := check{Name: name, Status: statusWarn, Message: why + ": no memory.pressure.* signal, no stall wake-up",
		Fix: "use a kernel with CONFIG_PSI (4.20 or later); boot with psi=1 where CONFIG_PSI_DEFAULT_DISABLED is set; or check --proc-root"}
	if stall {
		c.Status = statusFail
		c.Message = why + ": the memory.pressure.* thresholds configured can never be met"
	}
	return c
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// memoryEventsCheck checks how the agent learns of memory events: on
// cgroup v2, kubepods' memory.events (OOM kills); on v1, the memory
// cgroup's cgroup.event_control, which memcg notifications
// (--kernel-memcg-notification) write to.
func memoryEventsCheck(hc host.Config, memcgNotification bool) check {
	root, kubepods, v2, err := host.MemoryCgroupDirs(hc)
	if err != nil {
		return check{Name: "memory events", Status: statusFail, Message: fmt.Sprintf("cannot find the memory cgroups: %v", err),
			Fix: "set --cgroup-mount to the cgroup filesystem's mount (/sys/fs/cgroup), with the memory controller"}
	}
	if v2 {
		file := filepath.Join(kubepods, "memory.events")
		if _, err := os.Stat(file); err != nil {
			return check{Name: "memory.events", Status: statusWarn, Message: fmt.Sprintf("cgroup v2: %s is not readable (%v): OOM kills in the pods are not counted", file, err),
				Fix: "run doctor again once the kubelet has made kubepods; or check --cgroup-root and --cgroup-driver"}
		}
		return check{Name: "memory.events", Status: statusOK, Message: "cgroup v2: " + file + " is readable"}
	}
	const name = "memcg notification"
	if !memcgNotification {
		return check{Name: name, Status: statusOK, Message: "cgroup v1: --kernel-memcg-notification=false: memory thresholds wait for the next pass or the fast poll"}
	}
	file := filepath.Join(root, "cgroup.event_control")
	st, err := os.Stat(file)
	switch {
	case err != nil:
		return check{Name: name, Status: statusWarn, Message: fmt.Sprintf("cgroup v1: %s: %v: memory thresholds cannot wake a pass at once", file, err),
			Fix: "check --cgroup-mount; or set --kernel-memcg-notification=false"}
	case st.Mode().Perm()&0o222 == 0:
		return check{Name: name, Status: statusWarn, Message: fmt.Sprintf("cgroup v1: %s is not writable (mode %v): memory thresholds cannot wake a pass at once", file, st.Mode().Perm()),
			Fix: "mount the cgroup filesystem read-write for the agent; or set --kernel-memcg-notification=false"}
	}
	return check{Name: name, Status: statusOK, Message: "cgroup v1: " + file + " takes memory threshold notifications"}
}

// stateDirCheck checks that the agent can write its flight records:
// a file created and removed in --state-dir, or, when it does not exist
// yet, its nearest existing parent is a writable directory (the agent
// creates it).
func stateDirCheck(dir string) check {
	const name = "state directory"
	fix := "make --state-dir a writable directory on a filesystem mounted read-write, or point --state-dir elsewhere"
	probe := dir
	for {
		st, err := os.Stat(probe)
		if errors.Is(err, fs.ErrNotExist) && filepath.Dir(probe) != probe {
			probe = filepath.Dir(probe)
			continue
		}
		if err != nil {
			return check{Name: name, Status: statusFail, Message: fmt.Sprintf("--state-dir %s: %v", dir, err), Fix: fix}
		}
		if !st.IsDir() {
			return check{Name: name, Status: statusFail, Message: fmt.Sprintf("--state-dir %s: %s is not a directory", dir, probe), Fix: fix}
		}
		break
	}
	f, err := os.CreateTemp(probe, ".evictd-doctor-*")
	if err != nil {
		return check{Name: name, Status: statusFail, Message: fmt.Sprintf("--state-dir %s: cannot write in %s: %v", dir, probe, err), Fix: fix}
	}
	err = errors.Join(f.Close(), os.Remove(f.Name()))
	if err != nil {
		return check{Name: name, Status: statusFail, Message: fmt.Sprintf("--state-dir %s: %v", dir, err), Fix: fix}
	}
	if probe != dir {
		return check{Name: name, Status: statusOK, Message: fmt.Sprintf("--state-dir %s does not exist yet; the agent creates it in %s, which is writable", dir, probe)}
	}
	return check{Name: name, Status: statusOK, Message: fmt.Sprintf("--state-dir %s is writable", dir)}
}
