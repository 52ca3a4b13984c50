package host

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/testing/testagent"
)

// nobody is the user the test runs the agent as; criGroup is the group of
// the CRI socket (any number will do: setpriv takes it as it is).
const (
	nobody   = 65534
	criGroup = 4242
)

// executableByAll copies the evictd binary into a directory every user
// may search: the build's own directory is root's alone.
func executableByAll(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "evictd-own-user")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(testagent.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	bin := filepath.Join(dir, "evictd")
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return bin
}

// procStatus returns the lines of /proc/PID/status named by keys.
func procStatus(t *testing.T, pid int, keys ...string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && slices.Contains(keys, k) {
			got[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return got
}

// observedSignals asks the agent's /status for the signals it observed.
func observedSignals(t *testing.T, addr string) []string {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Observations []struct {
			Signal string `json:"signal"`
		} `json:"observations"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("decode /status: %v", err)
	}
	var got []string
	for _, o := range st.Observations {
		got = append(got, o.Signal)
	}
	return got
}

// criSocket listens on a unix socket of root and group criGroup, mode
// 0660, as containerd's with a [grpc] gid, and counts the connections made
// to it. It does not speak CRI: a connection is all the test looks for.
func criSocket(t *testing.T, dir string) (endpoint string, accepted *atomic.Int64) {
	t.Helper()
	path := filepath.Join(dir, "cri.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	if err := os.Chown(path, 0, criGroup); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		t.Fatal(err)
	}
	accepted = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	return "unix://" + path, accepted
}

// TestAgentRunsAsOwnUser runs the agent as systemd/evictd.service.d/
// own-user.conf.example has systemd run it: as a user other than root
// (nobody), with CAP_DAC_READ_SEARCH as its one capability, ambient, no way
// to gain more, and the CRI socket's group. It passes, reading the node's
// /proc and cgroups, measures a kubelet root dir inside a directory only
// root may enter, and connects to a CRI socket of root and its group.
// Without the group it cannot connect; without the capability it cannot
// enter the kubelet root dir either.
func TestAgentRunsAsOwnUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start the agent as another user")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("no setpriv (util-linux) on PATH")
	}
	bin := executableByAll(t)
	// t.TempDir's parent is root's alone (0700).
	rootDir := filepath.Join(t.TempDir(), "kubelet")
	if err := os.Mkdir(rootDir, 0o755); err != nil {
		t.Fatal(err)
	}

	withCap := []string{"--inh-caps=-all,+dac_read_search", "--ambient-caps=-all,+dac_read_search", "--bounding-set=-all,+dac_read_search"}
	for _, tc := range []struct {
		name       string
		caps       []string // setpriv's capability flags
		capSet     string   // CapEff and CapAmb of the agent
		group      bool     // the CRI socket's group
		wantNodefs bool
	}{
		{"with CAP_DAC_READ_SEARCH and the CRI socket's group", withCap, "0000000000000004", true, true},
		{"with CAP_DAC_READ_SEARCH alone", withCap, "0000000000000004", false, true},
		{"without capabilities", []string{"--inh-caps=-all", "--bounding-set=-all"}, "0000000000000000", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := testagent.FreeAddr(t)
			endpoint, accepted := criSocket(t, filepath.Dir(bin))
			groups, wantGroups := "--clear-groups", ""
			if tc.group {
				groups, wantGroups = fmt.Sprintf("--groups=%d", criGroup), fmt.Sprint(criGroup)
			}
			args := append([]string{fmt.Sprintf("--reuid=%d", nobody), fmt.Sprintf("--regid=%d", nobody), groups, "--no-new-privs"}, tc.caps...)
			args = append(args, bin, "--metrics-bind-address", addr, "--root-dir", rootDir, "--housekeeping-interval", "1s",
				"--container-runtime-endpoint="+endpoint, "--runtime-request-timeout=1s")
			cmd := exec.Command(setpriv, args...)
			logs := testagent.StartCmd(t, cmd)
			testagent.WaitHTTP(t, "http://"+addr+"/readyz")

			// setpriv execs the agent: same PID.
			st := procStatus(t, cmd.Process.Pid, "Uid", "Groups", "CapEff", "CapAmb", "NoNewPrivs")
			want := map[string]string{
				"Uid": fmt.Sprintf("%d %d %d %d", nobody, nobody, nobody, nobody), "Groups": wantGroups,
				"CapEff": tc.capSet, "CapAmb": tc.capSet, "NoNewPrivs": "1",
			}
			for k, w := range want {
				if st[k] != w {
					t.Errorf("agent's %s: got %q, want %q", k, st[k], w)
				}
			}

			got := observedSignals(t, addr)
			if !slices.Contains(got, "memory.available") {
				t.Errorf("got observations of %q, want memory.available (/proc/meminfo and the memory cgroup)", got)
			}
			if slices.Contains(got, "nodefs.available") != tc.wantNodefs {
				t.Errorf("got observations of %q; nodefs.available of a kubelet root dir only root may enter observed: want %t", got, tc.wantNodefs)
			}
			// The agent dials the runtime before its first pass.
			if n := accepted.Load(); (n > 0) != tc.group {
				t.Errorf("got %d connections to the CRI socket (root:%d 0660), want some: %t", n, criGroup, tc.group)
			}
			stopAgent(t, cmd)
			denied := slices.ContainsFunc(strings.Split(logs.String(), "\n"), func(l string) bool {
				return strings.Contains(l, "cri.sock") && strings.Contains(l, "permission denied")
			})
			if denied == tc.group {
				t.Errorf("agent logged a \"permission denied\" of the CRI socket: %t, want %t:\n%s", denied, !tc.group, logs.String())
			}
			// On cgroup v1, memcg thresholds are armed by root alone when
			// cgroup.event_control is (own-user.conf.example says so).
			if fi, err := os.Stat("/sys/fs/cgroup/memory/cgroup.event_control"); err == nil && fi.Mode().Perm()&0o022 == 0 &&
				!strings.Contains(logs.String(), "cgroup.event_control: permission denied") {
				t.Errorf("cgroup.event_control is %v: want the agent to log that it may not write it:\n%s", fi.Mode().Perm(), logs.String())
			}
		})
	}
}
