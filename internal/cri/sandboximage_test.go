package cri

import (
	"strings"
	"testing"
)

// TestSandboxImageOf reads the sandbox image from verbose status answers of
// the runtimes evictd meets: containerd 1.x names it in its config,
// containerd 2 does not (it reports it pinned), and a config that
// is not JSON is an error naming the endpoint, not a guess.
func TestSandboxImageOf(t *testing.T) {
	for _, tc := range []struct {
		name    string
		info    map[string]string
		want    string
		wantErr string
	}{
		{name: "containerd 1.6", info: map[string]string{
			"config": `{"containerd":{"snapshotter":"overlayfs"},"sandboxImage":"registry.k8s.io/pause:3.6","containerdRootDir":"/var/lib/containerd"}`,
		}, want: "registry.k8s.io/pause:3.6"},
		// containerd 2.x: the runtime plugin's config; the sandbox image is
		// the images plugin's pinned_images.sandbox, not in it.
		{name: "containerd 2.4", info: map[string]string{
			"config":            `{"containerd":{"defaultRuntimeName":"runc"},"cni":{"binDirs":["/opt/cni/bin"]},"enableSelinux":false,"containerdRootDir":"/var/lib/containerd","rootDir":"/var/lib/containerd/io.containerd.grpc.v1.cri"}`,
			"golang":            `"go1.24.9"`,
			"lastCNILoadStatus": "OK",
		}},
		// A runtime whose verbose status has no "config" key.
		{name: "no config", info: map[string]string{"golang": `"go1.24.9"`}},
		{name: "not verbose", info: nil},
		{name: "config not JSON", info: map[string]string{"config": "sandbox_image = 'pause'"}, wantErr: "unix:///run/test.sock"},
		{name: "sandboxImage not a string", info: map[string]string{"config": `{"sandboxImage":3}`}, wantErr: "sandboxImage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sandboxImageOf(tc.info, "unix:///run/test.sock")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("sandboxImageOf = %q, %v; want an error naming %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("sandboxImageOf = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
