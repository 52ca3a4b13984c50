package testruntime

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/testing/testcluster"
)

func TestConfigVersion(t *testing.T) {
	for _, tc := range []struct {
		cfg  string
		want int
	}{
		{sampleDefaults, 2}, // no version line: containerd 1.6's settings
		{"disabled_plugins = []\nversion = 2\n\n[cgroup]\n", 2},
		{"version = 3\nroot = '/var/lib/containerd'\n", 3},
		{sampleDefaultsV4, 4},
		{"version = 5\n", 0},
		{"version = two\n", 0},
	} {
		got, err := configVersion(tc.cfg)
		if got != tc.want || (err != nil) != (tc.want == 0) {
			t.Errorf("configVersion(%.30q) = %d, %v; want %d", tc.cfg, got, err, tc.want)
		}
	}
}

// TestConfigRenderV4 applies the settings to containerd 2.4's default
// config: the default lane's real one (testcluster.ContainerdBinDir), else a sample
// of it.
func TestConfigRenderV4(t *testing.T) {
	c := daemonConfig{root: "/r", state: "/s", socket: "/d/containerd.sock", cniDir: "/d/cni",
		sandboxImage: PauseImage, snapshotter: "native", statsPeriodSec: 1, systemdCgroup: true,
		shim: "/b/containerd-shim-runc-v2"}
	defaults := sampleDefaultsV4
	if dir, err := testcluster.ContainerdBinDir(); err == nil && dir != "" {
		if defaults, err = runCommand(filepath.Join(dir, "containerd"), "config", "default"); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.render(defaults)
	if err != nil {
		t.Fatal(err)
	}
	got = "\n" + got
	for _, want := range []string{
		"\nroot = \"/r\"\n", "\nstate = \"/s\"\n", "\nimports = []\n",
		"  [plugins.'io.containerd.server.v1.grpc']\n    address = \"/d/containerd.sock\"\n",
		"  [plugins.'io.containerd.server.v1.ttrpc']\n    address = \"/d/containerd.sock.ttrpc\"\n",
		"    snapshotter = \"native\"\n",
		"    stats_collect_period = 1\n",
		"      sandbox = \"evictd.test/pause:1\"\n",
		"    restrict_oom_score_adj = true\n",
		"    disable_apparmor = true\n",
		"    netns_mounts_under_state_dir = true\n",
		"          runtime_path = \"/b/containerd-shim-runc-v2\"\n",
		"            Root = \"/s/runc\"\n",
		"            SystemdCgroup = true\n",
		"      bin_dirs = [\"/d/cni/bin\"]\n",
		"      conf_dir = \"/d/cni/net.d\"\n",
		"    path = \"/r/opt\"\n",
		"  [plugins.'io.containerd.nri.v1.nri']\n    disable = true\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("rendered config lacks %q", want)
		}
	}
	// The runtime plugin's stats_collect_period (container stats, a
	// duration) is not the images plugin's (snapshot usage, seconds).
	if !strings.Contains(got, "stats_collect_period = ''") && strings.Contains(defaults, "stats_collect_period = ''") {
		t.Error("the runtime plugin's stats_collect_period was rewritten")
	}
	if strings.Contains(got, "\n[grpc]") || strings.Contains(got, "\n[ttrpc]") {
		t.Error("version 4 config has a top-level [grpc] or [ttrpc]")
	}
}

// sampleDefaultsV4 holds the lines of containerd 2.4.2's default config
// (version 4) that render rewrites, and their neighbours.
const sampleDefaultsV4 = `version = 4
root = '/var/lib/containerd'
state = '/run/containerd'
temp = ''
imports = ['/etc/containerd/conf.d/*.toml']

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    stats_collect_period = 10

    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = 'registry.k8s.io/pause:3.10.2'

  [plugins.'io.containerd.cri.v1.runtime']
    disable_apparmor = false
    restrict_oom_score_adj = false
    netns_mounts_under_state_dir = false
    stats_collect_period = ''

    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'

      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes]
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
          runtime_type = 'io.containerd.runc.v2'
          runtime_path = ''

          [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
            Root = ''
            SystemdCgroup = false

    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['/opt/cni/bin']
      conf_dir = '/etc/cni/net.d'

  [plugins.'io.containerd.grpc.v1.cri']
    disable_tcp_service = true

  [plugins.'io.containerd.internal.v1.opt']
    path = '/opt/containerd'

  [plugins.'io.containerd.nri.v1.nri']
    disable = false
    socket_path = '/var/run/nri/nri.sock'

  [plugins.'io.containerd.server.v1.grpc']
    address = '/run/containerd/containerd.sock'

  [plugins.'io.containerd.server.v1.ttrpc']
    address = '/run/containerd/containerd.sock.ttrpc'
`

// TestConfigPromptGC renders Options.PromptGC into the default configs of
// both lanes' containerd (2.x's version 4, 1.6's version 2): the garbage
// collector's section gets its deletion and pause thresholds, and a
// containerd whose defaults lack them fails the render.
func TestConfigPromptGC(t *testing.T) {
	bins := map[string]string{"PATH's": "containerd"}
	if dir, err := testcluster.ContainerdBinDir(); err == nil && dir != "" {
		bins["the default lane's"] = filepath.Join(dir, "containerd")
	}
	ran := 0
	for lane, bin := range bins {
		if _, err := exec.LookPath(bin); err != nil {
			t.Logf("%s containerd (%s): %v", lane, bin, err)
			continue
		}
		defaults, err := runCommand(bin, "config", "default")
		if err != nil {
			t.Fatal(err)
		}
		c := daemonConfig{root: "/r", state: "/s", socket: "/d/containerd.sock", cniDir: "/d/cni",
			sandboxImage: PauseImage, snapshotter: "native", statsPeriodSec: 1, promptGC: true}
		got, err := c.render(defaults)
		if err != nil {
			t.Fatalf("%s containerd: %v", lane, err)
		}
		for _, want := range []string{"deletion_threshold = 1\n", "pause_threshold = 0.5\n", "mutation_threshold = 100\n"} {
			if !strings.Contains(got, want) {
				t.Errorf("%s containerd's config lacks %q:\n%s", lane, want, got)
			}
		}
		ran++
	}
	if ran == 0 && os.Getenv("CI") == "true" {
		t.Fatal("no containerd to take the default config of, and CI=true")
	}
}
