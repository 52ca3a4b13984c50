package host

import (
	"path/filepath"
	"testing"
)

func TestMemoryCgroupDirs(t *testing.T) {
	tests := []struct {
		name, cgroupRoot, driver string
		wantRoot, wantKubepods   string
		wantV2                   bool
	}{
		{"v1 cgroupfs", "/", DriverCgroupfs, "testdata/cgroupv1/memory", "testdata/cgroupv1/memory/kubepods", false},
		{"v1 systemd", "/", DriverSystemd, "testdata/cgroupv1/memory", "testdata/cgroupv1/memory/kubepods.slice", false},
		{"v2 systemd under a slice", "/node.slice", DriverSystemd, "testdata/cgroupv2", "testdata/cgroupv2/node.slice/node-kubepods.slice", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mount := "testdata/cgroupv1"
			if tt.wantV2 {
				mount = "testdata/cgroupv2"
			}
			abs, err := filepath.Abs(".")
			if err != nil {
				t.Fatal(err)
			}
			mount = filepath.Join(abs, mount)
			cfg := DefaultConfig()
			cfg.CgroupMount, cfg.CgroupRoot, cfg.CgroupDriver = mount, tt.cgroupRoot, tt.driver
			root, kubepods, v2, err := MemoryCgroupDirs(cfg)
			if err != nil {
				t.Fatal(err)
			}
			tt.wantRoot, tt.wantKubepods = filepath.Join(abs, tt.wantRoot), filepath.Join(abs, tt.wantKubepods)
			if root != tt.wantRoot || kubepods != tt.wantKubepods || v2 != tt.wantV2 {
				t.Errorf("got %s, %s, v2 %v; want %s, %s, v2 %v", root, kubepods, v2, tt.wantRoot, tt.wantKubepods, tt.wantV2)
			}
		})
	}
}
