package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/evictd/evictd/internal/config"
	"github.com/evictd/evictd/internal/kubeclient"
	"github.com/evictd/evictd/internal/testing/hosttree"
)

// runDoctor runs `evictd doctor -o json` with args and decodes its report.
func runDoctor(t *testing.T, args ...string) (doctorReport, string, int) {
	t.Helper()
	out, errOut, code := runCmd(append([]string{"doctor", "-o", "json"}, args...)...)
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	var r doctorReport
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("stdout is not doctor's JSON report: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	return r, errOut, code
}

// find returns the report's check of that name, failing t without one.
func (r doctorReport) find(t *testing.T, name string) check {
	t.Helper()
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, r.Checks)
	return check{}
}

// TestDoctorOnFixtureNode provokes each failure doctor can find on the
// node's files, on a fixture tree (cgroup v1, as hosttree writes it): a
// socket with no runtime, the wrong cgroup driver, no PSI under a stall
// threshold, a state directory that is a file. Standalone, the API
// checks are skipped, saying why.
func TestDoctorOnFixtureNode(t *testing.T) {
	dir := t.TempDir()
	withPSI, err := hosttree.Write(filepath.Join(dir, "psi"), hosttree.Node{MemTotal: 8 << 30, KubepodsLimit: 6 << 30})
	if err != nil {
		t.Fatal(err)
	}
	noPSI, err := hosttree.Write(filepath.Join(dir, "nopsi"), hosttree.Node{MemTotal: 8 << 30, KubepodsLimit: 6 << 30, NoPSI: true})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	node := func(tree hosttree.Tree, args ...string) []string {
		return append([]string{"--hostname-override=n1", "--proc-root=" + tree.Proc, "--cgroup-mount=" + tree.Cgroup, "--root-dir=" + dir,
			"--state-dir=" + filepath.Join(dir, "state"), "--container-runtime-endpoint=unix://" + filepath.Join(dir, "none.sock"), "--runtime-request-timeout=1s"}, args...)
	}
	stall := "--eviction-hard=memory.available<100Mi,memory.pressure.full.avg10>20"
	for _, tc := range []struct {
		name   string
		args   []string
		check  string
		status checkStatus
		want   string
	}{
		{"no runtime at the socket", node(withPSI), "container runtime", statusFail, "none.sock: connect: no such file or directory"},
		{"the driver matches", node(withPSI), "cgroup driver", statusOK, "kubepods exists"},
		{"the wrong driver", node(withPSI, "--cgroup-driver=systemd"), "cgroup driver", statusFail, "the kubelet uses the cgroupfs driver; set --cgroup-driver=cgroupfs"},
		{"PSI", node(withPSI), "PSI", statusOK, "pressure/memory is readable"},
		{"no PSI", node(noPSI), "PSI", statusWarn, "no memory.pressure.* signal"},
		{"no PSI under a stall threshold", node(noPSI, stall), "PSI", statusFail, "the memory.pressure.* thresholds configured can never be met"},
		{"memcg notifications", node(withPSI), "memcg notification", statusWarn, "cgroup.event_control: stat"},
		{"memcg notifications off", node(withPSI, "--kernel-memcg-notification=false"), "memcg notification", statusOK, "--kernel-memcg-notification=false"},
		{"a state directory to create", node(withPSI), "state directory", statusOK, "does not exist yet; the agent creates it in " + dir},
		{"a state directory under a file", node(withPSI, "--state-dir="+filepath.Join(file, "state")), "state directory", statusFail, "not a directory"},
		{"standalone", node(withPSI), "API server", statusSkip, "no --kubeconfig: the agent runs standalone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, errOut, code := runDoctor(t, tc.args...)
			c := r.find(t, tc.check)
			if c.Status != tc.status || !strings.Contains(c.Message, tc.want) {
				t.Errorf("%s: got %s %q, want %s with %q", tc.check, c.Status, c.Message, tc.status, tc.want)
			}
			if (c.Status == statusFail || c.Status == statusWarn) && c.Fix == "" {
				t.Errorf("%s: %s without a fix", tc.check, c.Status)
			}
			// The runtime's socket is missing in every case.
			if code != 1 || r.Failed == 0 || !strings.Contains(errOut, "check(s) failed") {
				t.Errorf("exit %d, %d failed, stderr %q; want exit 1 and the count", code, r.Failed, errOut)
			}
		})
	}
}

// TestDoctorAPIUnreachable: a kubeconfig whose server does not answer is
// a failure, and the permissions are skipped, saying why.
func TestDoctorAPIUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := "https://" + l.Addr().String()
	l.Close()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["evictd"] = &clientcmdapi.AuthInfo{Token: "t0ken"}
	cfg.Contexts["evictd"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "evictd"}
	cfg.CurrentContext = "evictd"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	r, _, code := runDoctor(t, "--hostname-override=n1", "--kubeconfig="+path, "--state-dir="+t.TempDir(),
		"--container-runtime-endpoint=unix:///nonexistent/evictd-test.sock", "--runtime-request-timeout=1s")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if c := r.find(t, "API server"); c.Status != statusFail || !strings.Contains(c.Message, server+": GET /version") || !strings.Contains(c.Message, "connection refused") {
		t.Errorf("API server: got %s %q, want a failure naming %s and the refusal", c.Status, c.Message, server)
	}
	if c := r.find(t, "permissions"); c.Status != statusSkip || c.Message != "the API server cannot be reached" {
		t.Errorf("permissions: got %s %q, want skipped", c.Status, c.Message)
	}
}

// TestDoctorText: the text report is a line per check, its status first,
// and the fix under a check that is not ok.
func TestDoctorText(t *testing.T) {
	out, _, code := runCmd("doctor", "--hostname-override=n1", "--state-dir="+t.TempDir(), "--container-runtime-endpoint=unix:///nonexistent/evictd-test.sock", "--runtime-request-timeout=1s")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(lines[0], "fail  container runtime: cannot use unix:///nonexistent/evictd-test.sock") ||
		!strings.HasPrefix(lines[1], "      fix: start the container runtime") {
		t.Errorf("want the runtime's failure and its fix first:\n%s", out)
	}
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "skip  API server: no --kubeconfig") {
		t.Errorf("want the API server skipped last, got %q", last)
	}
	if _, errOut, code := runCmd("doctor", "--hostname-override=n1", "-o", "yaml"); code != 2 || !strings.Contains(errOut, `-o: invalid value "yaml": want text or json`) {
		t.Errorf("-o yaml: exit %d, stderr %q; want a usage error", code, errOut)
	}
}

// TestPermissions: the requests the agent makes, by configuration.
func TestPermissions(t *testing.T) {
	nodeBound := &kubeclient.TokenClaims{Namespace: "kube-system", ServiceAccount: "evictd", Node: "n1", NodeUID: "u1"}
	podBound := &kubeclient.TokenClaims{Namespace: "kube-system", ServiceAccount: "evictd", Node: "n1", NodeUID: "u1", Pod: "evictd-x"}
	for _, tc := range []struct {
		name     string
		args     []string
		token    *kubeclient.TokenClaims
		want     []string
		dontWant []string
	}{
		{"defaults, impersonating the node", nil, nil, []string{
			"list nodes n1", "watch nodes n1", "patch nodes n1", "patch nodes/status n1", "patch pods/status", "create events", "patch events",
			"get leases.coordination.k8s.io evictd-n1 in kube-system", "create leases.coordination.k8s.io in kube-system", "update leases.coordination.k8s.io evictd-n1 in kube-system",
			"impersonate:associated-node nodes.authentication.k8s.io n1",
			"impersonate-on:associated-node:list pods", "impersonate-on:associated-node:watch pods", "impersonate-on:associated-node:delete pods",
			"impersonate-on:associated-node:create pods/eviction",
		}, []string{"list pods", "create pods/eviction", "create serviceaccounts/token", "create tokenreviews.authentication.k8s.io"}},
		{"before 1.36", []string{"--impersonate-node=false"}, nil,
			[]string{"list pods", "watch pods", "delete pods", "create pods/eviction"},
			[]string{"impersonate:associated-node nodes.authentication.k8s.io n1", "impersonate-on:associated-node:list pods"}},
		{"a node-bound token renewed", nil, nodeBound, []string{"create serviceaccounts/token evictd in kube-system"}, nil},
		{"a node-bound token, no renewal", []string{"--token-renewal=false"}, nodeBound, nil, []string{"create serviceaccounts/token evictd in kube-system"}},
		{"a pod-bound token: the kubelet renews it", nil, podBound, nil, []string{"create serviceaccounts/token evictd in kube-system"}},
		{"the Lease elsewhere", []string{"--lease-namespace=evictd"}, nil, []string{"update leases.coordination.k8s.io evictd-n1 in evictd"}, []string{"get leases.coordination.k8s.io evictd-n1 in kube-system"}},
		{"delegated auth", []string{"--metrics-delegated-auth", "--kubeconfig=/k"}, nil,
			[]string{"create tokenreviews.authentication.k8s.io", "create subjectaccessreviews.authorization.k8s.io"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, opts := config.NewFlagSet("evictd")
			if err := fs.Parse(append([]string{"--hostname-override=n1"}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			cfg, err := opts.Complete(fs)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range permissions(cfg, tc.token) {
				got = append(got, p.String())
				if p.Why == "" || p.Fix == "" {
					t.Errorf("%s: no reason or no fix", p)
				}
			}
			for _, w := range tc.want {
				if !slices.Contains(got, w) {
					t.Errorf("lacks %q: %q", w, got)
				}
			}
			for _, w := range tc.dontWant {
				if slices.Contains(got, w) {
					t.Errorf("has %q: %q", w, got)
				}
			}
		})
	}
}

func TestPSICheck(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content string
		stall         bool
		status        checkStatus
		want          string
	}{
		{"averages", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", false, statusOK, "readable"},
		{"garbage", "nothing here\n", false, statusWarn, `does not hold PSI averages ("nothing here")`},
		{"garbage under a stall threshold", "nothing here\n", true, statusFail, "can never be met"},
		{"missing", "", false, statusWarn, "no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proc := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			if tc.content != "" {
				if err := os.MkdirAll(filepath.Join(proc, "pressure"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(proc, "pressure", "memory"), []byte(tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			c := psiCheck(proc, tc.stall)
			if c.Status != tc.status || !strings.Contains(c.Message, tc.want) {
				t.Errorf("got %s %q, want %s with %q", c.Status, c.Message, tc.status, tc.want)
			}
		})
	}
}

// TestMemoryEventsCheckV2: on a cgroup v2 fixture, kubepods.slice's
// memory.events is what the agent reads its OOM kills from.
func TestMemoryEventsCheckV2(t *testing.T) {
	mount := t.TempDir()
	kubepods := filepath.Join(mount, "kubepods.slice")
	if err := os.MkdirAll(kubepods, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mount, "cgroup.controllers"), []byte("cpu io memory pids\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hc := hostConfigFor(mount, "systemd")
	if c := memoryEventsCheck(hc, true); c.Status != statusWarn || !strings.Contains(c.Message, "memory.events is not readable") || c.Fix == "" {
		t.Errorf("without memory.events: %+v, want a warning", c)
	}
	if err := os.WriteFile(filepath.Join(kubepods, "memory.events"), []byte("low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c := memoryEventsCheck(hc, true); c.Status != statusOK || c.Message != "cgroup v2: "+filepath.Join(kubepods, "memory.events")+" is readable" {
		t.Errorf("with memory.events: %+v, want ok", c)
	}
}
