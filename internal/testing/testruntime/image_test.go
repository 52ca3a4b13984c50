package testruntime

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteImage checks the layout tarball: every blob under its digest, the
// index naming the image, the config's entrypoint and diff_ids, the layers'
// contents.
func TestWriteImage(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "workload")
	if err := os.WriteFile(bin, []byte("#!not really a binary\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		spec     imageSpec
		wantSize int64 // of /filler; 0: no extra layer
	}{
		{"plain", imageSpec{ref: "evictd.test/workload:1", cmd: []string{"sleep"}}, 0},
		{"extra layer", imageSpec{ref: "evictd.test/big:2", cmd: []string{"sleep"}, extraMiB: 3}, 3 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := writeImage(&buf, dir, bin, tt.spec); err != nil {
				t.Fatal(err)
			}
			files := readTar(t, &buf)
			if got := string(files["oci-layout"]); got != `{"imageLayoutVersion":"1.0.0"}` {
				t.Errorf("oci-layout = %s", got)
			}
			var idx index
			mustUnmarshal(t, files["index.json"], &idx)
			if len(idx.Manifests) != 1 {
				t.Fatalf("index has %d manifests, want 1", len(idx.Manifests))
			}
			md := idx.Manifests[0]
			if got := md.Annotations[annotationContainerdName]; got != tt.spec.ref {
				t.Errorf("%s = %q, want %q", annotationContainerdName, got, tt.spec.ref)
			}
			if got, want := md.Annotations[annotationRefName], refTag(tt.spec.ref); got != want {
				t.Errorf("%s = %q, want %q", annotationRefName, got, want)
			}
			var mf manifest
			mustUnmarshal(t, blobOf(t, files, md), &mf)
			var cfg imageConfig
			mustUnmarshal(t, blobOf(t, files, mf.Config), &cfg)
			if got := strings.Join(cfg.Config.Entrypoint, " ") + " " + strings.Join(cfg.Config.Cmd, " "); got != "/workload sleep" {
				t.Errorf("entrypoint and cmd = %q, want /workload sleep", got)
			}
			wantLayers := 1
			if tt.wantSize > 0 {
				wantLayers = 2
			}
			if len(mf.Layers) != wantLayers || len(cfg.RootFS.DiffIDs) != wantLayers {
				t.Fatalf("%d layers and %d diff_ids, want %d", len(mf.Layers), len(cfg.RootFS.DiffIDs), wantLayers)
			}
			var contents map[string][]byte
			for i, l := range mf.Layers {
				zr, err := gzip.NewReader(bytes.NewReader(blobOf(t, files, l)))
				if err != nil {
					t.Fatal(err)
				}
				raw, err := io.ReadAll(zr)
				if err != nil {
					t.Fatal(err)
				}
				if got := sha256Digest(raw); got != cfg.RootFS.DiffIDs[i] {
					t.Errorf("layer %d: uncompressed digest %s, diff_id %s", i, got, cfg.RootFS.DiffIDs[i])
				}
				layer := readTar(t, bytes.NewReader(raw))
				if i == 0 {
					contents = layer
				} else if got := int64(len(layer["filler"])); got != tt.wantSize {
					t.Errorf("filler is %d bytes, want %d", got, tt.wantSize)
				}
			}
			if got := string(contents["workload"]); got != "#!not really a binary\n" {
				t.Errorf("/workload = %q", got)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				t.Errorf("staging files left in %s: %v", dir, entries)
			}
		})
	}
}

func TestCheckRef(t *testing.T) {
	tests := []struct {
		ref string
		ok  bool
	}{
		{"evictd.test/workload:1", true},
		{"localhost/x:latest", true},
		{"127.0.0.1:5000/a/b:c", true},
		{"workload:1", false},
		{"library/workload:1", false},
		{"evictd.test/workload", false},
		{"evictd.test/workload@sha256:00", false},
		{"evictd.test/Workload:1", false},
	}
	for _, tt := range tests {
		if err := checkRef(tt.ref); (err == nil) != tt.ok {
			t.Errorf("checkRef(%q) = %v, want ok %v", tt.ref, err, tt.ok)
		}
	}
}

// TestConfigRender applies the settings to containerd's real default config
// when containerd is installed, else to a sample of it.
func TestConfigRender(t *testing.T) {
	c := daemonConfig{root: "/r", state: "/s", socket: "/d/containerd.sock", cniDir: "/d/cni",
		sandboxImage: PauseImage, snapshotter: "native", statsPeriodSec: 1, systemdCgroup: true}
	defaults := sampleDefaults
	if _, err := exec.LookPath("containerd"); err == nil {
		if defaults, err = runCommand("containerd", "config", "default"); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.render(defaults)
	got = "\n" + got
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\nroot = \"/r\"\n", "\nstate = \"/s\"\n",
		"[grpc]\n  address = \"/d/containerd.sock\"\n",
		"[ttrpc]\n  address = \"/d/containerd.sock.ttrpc\"\n",
		"    restrict_oom_score_adj = true\n",
		"    sandbox_image = \"evictd.test/pause:1\"\n",
		"      snapshotter = \"native\"\n",
		"            Root = \"/s/runc\"\n",
		"            SystemdCgroup = true\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("rendered config lacks %q", want)
		}
	}
	if _, err := c.render(strings.Replace(defaults, "restrict_oom_score_adj", "renamed", 1)); err == nil ||
		!strings.Contains(err.Error(), "restrict_oom_score_adj") {
		t.Errorf("render without restrict_oom_score_adj: %v, want an error naming it", err)
	}
}

// sampleDefaults holds the lines of containerd 1.6's default config that
// render rewrites.
const sampleDefaults = `root = "/var/lib/containerd"
state = "/run/containerd"

[grpc]
  address = "/run/containerd/containerd.sock"

[plugins]

  [plugins."io.containerd.grpc.v1.cri"]
    disable_apparmor = false
    netns_mounts_under_state_dir = false
    restrict_oom_score_adj = false
    sandbox_image = "registry.k8s.io/pause:3.6"
    stats_collect_period = 10

    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/opt/cni/bin"
      conf_dir = "/etc/cni/net.d"

    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"

        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
            Root = ""
            SystemdCgroup = false

  [plugins."io.containerd.internal.v1.opt"]
    path = "/opt/containerd"

[ttrpc]
  address = ""
`

func readTar(t *testing.T, r io.Reader) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if hdr.Name == "workload" && hdr.Mode != 0o755 {
				t.Errorf("/workload mode %o, want 755", hdr.Mode)
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[hdr.Name] = b
		}
	}
}

// blobOf returns the blob d points to, checking its size and digest.
func blobOf(t *testing.T, files map[string][]byte, d descriptor) []byte {
	t.Helper()
	b, ok := files["blobs/sha256/"+strings.TrimPrefix(d.Digest, "sha256:")]
	if !ok {
		t.Fatalf("no blob %s", d.Digest)
	}
	if int64(len(b)) != d.Size || sha256Digest(b) != d.Digest {
		t.Fatalf("blob %s: %d bytes with digest %s, descriptor says %d", d.Digest, len(b), sha256Digest(b), d.Size)
	}
	return b
}

func sha256Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func mustUnmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
}
