package host

import (
	"strings"
	"testing"

	"github.com/evictd/evictd/signals"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*Config)
		wantErr []string // nil: valid
	}{
		{name: "defaults", change: func(*Config) {}},
		{name: "systemd with slice root", change: func(c *Config) {
			c.CgroupDriver, c.CgroupRoot = DriverSystemd, "/evictd.slice/evictd-node.slice"
		}},
		{name: "imagefs set", change: func(c *Config) { c.ImageFsPath = "/var/lib/containerd" }},
		{name: "empty proc root", change: func(c *Config) { c.ProcRoot = "" },
			wantErr: []string{`ProcRoot (proc root) "": must be set`}},
		{name: "relative cgroup mount", change: func(c *Config) { c.CgroupMount = "sys/fs/cgroup" },
			wantErr: []string{`CgroupMount (cgroup mount) "sys/fs/cgroup": must be an absolute path`}},
		{name: "relative kubelet root dir", change: func(c *Config) { c.KubeletRootDir = "kubelet" },
			wantErr: []string{`KubeletRootDir (--root-dir) "kubelet"`}},
		{name: "relative imagefs", change: func(c *Config) { c.ImageFsPath = "containerd" },
			wantErr: []string{`ImageFsPath (imagefs path) "containerd"`}},
		{name: "unknown driver", change: func(c *Config) { c.CgroupDriver = "docker" },
			wantErr: []string{`CgroupDriver (--cgroup-driver) "docker": must be "cgroupfs" or "systemd"`}},
		{name: "relative cgroup root", change: func(c *Config) { c.CgroupRoot = "kube" },
			wantErr: []string{`CgroupRoot (--cgroup-root) "kube"`}},
		{name: "unclean cgroup root", change: func(c *Config) { c.CgroupRoot = "/a//b" },
			wantErr: []string{`CgroupRoot (--cgroup-root) "/a//b": must be a clean path`}},
		{name: "systemd root not a slice", change: func(c *Config) { c.CgroupDriver, c.CgroupRoot = DriverSystemd, "/evictd" },
			wantErr: []string{`CgroupRoot (--cgroup-root) "/evictd"`, "slice"}},
		{name: "systemd slice in the wrong place", change: func(c *Config) { c.CgroupDriver, c.CgroupRoot = DriverSystemd, "/a-b.slice" },
			wantErr: []string{`"/a-b.slice"`, "lives at /a.slice/a-b.slice"}},
		{name: "negative reserved", change: func(c *Config) { c.ReservedMemory = -1 },
			wantErr: []string{"ReservedMemory", "-1", "must not be negative"}},
		{name: "every bad field is named", change: func(c *Config) { c.ProcRoot, c.CgroupDriver = "", "x" },
			wantErr: []string{"ProcRoot", "CgroupDriver"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.change(&cfg)
			err := cfg.Validate()
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got valid, want an error holding %q", tc.wantErr)
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("got %q, want it to hold %q", err, s)
				}
			}
		})
	}
}

func TestPodCgroupPath(t *testing.T) {
	const uid = "1234abcd-5678-90ef-1234-567890abcdef"
	tests := []struct {
		driver, root string
		qos          signals.QOSClass
		want         string
	}{
		{DriverCgroupfs, "/", signals.Guaranteed, "/kubepods/pod" + uid},
		{DriverCgroupfs, "/", signals.Burstable, "/kubepods/burstable/pod" + uid},
		{DriverCgroupfs, "/", signals.BestEffort, "/kubepods/besteffort/pod" + uid},
		{DriverCgroupfs, "/node/a", signals.Burstable, "/node/a/kubepods/burstable/pod" + uid},
		{DriverSystemd, "/", signals.Guaranteed, "/kubepods.slice/kubepods-pod1234abcd_5678_90ef_1234_567890abcdef.slice"},
		{DriverSystemd, "/", signals.Burstable,
			"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234abcd_5678_90ef_1234_567890abcdef.slice"},
		{DriverSystemd, "/", signals.BestEffort,
			"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1234abcd_5678_90ef_1234_567890abcdef.slice"},
		{DriverSystemd, "/node.slice", signals.BestEffort,
			"/node.slice/node-kubepods.slice/node-kubepods-besteffort.slice/node-kubepods-besteffort-pod1234abcd_5678_90ef_1234_567890abcdef.slice"},
	}
	for _, tc := range tests {
		t.Run(tc.driver+tc.root+string(tc.qos), func(t *testing.T) {
			root, err := rootCgroupName(tc.root, tc.driver)
			if err != nil {
				t.Fatal(err)
			}
			name, err := podCgroupName(kubepodsName(root), tc.qos, uid)
			if err != nil {
				t.Fatal(err)
			}
			if got := name.path(tc.driver); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
			// The last path element must map back to the pod component.
			parent := name[:len(name)-1]
			last := tc.want[strings.LastIndex(tc.want, "/")+1:]
			comp, ok := parent.childComponent(tc.driver, last)
			if !ok || comp != "pod"+uid {
				t.Errorf("childComponent(%q) got %q %v, want %q true", last, comp, ok, "pod"+uid)
			}
		})
	}
}

func TestPodCgroupNameRejects(t *testing.T) {
	tests := []struct {
		name string
		uid  string
		qos  signals.QOSClass
		want string
	}{
		{"empty uid", "", signals.Burstable, "cannot name a cgroup"},
		{"uid with a slash", "a/../b", signals.Burstable, "cannot name a cgroup"},
		{"unknown qos", "abc", "Platinum", `unknown QoS class "Platinum"`},
		{"no qos", "abc", "", `unknown QoS class ""`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := podCgroupName(kubepodsName(nil), tc.qos, tc.uid)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error holding %q", err, tc.want)
			}
		})
	}
}
