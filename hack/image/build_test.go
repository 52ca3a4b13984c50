package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// TestBuild builds the image of two stand-in binaries, reads the archive
// back as an OCI layout and checks what a runtime will see: the name
// containerd imports it under, one image per architecture, each running
// its own binary at /usr/bin/evictd as root, with the version as a label.
func TestBuild(t *testing.T) {
	dist := t.TempDir()
	o := options{version: "v1.2.3-4-gabcdef0", repo: "registry.example/evictd/evictd", dist: dist, arches: []string{"amd64", "arm64"}}
	for _, arch := range o.arches {
		if err := os.WriteFile(filepath.Join(dist, "evictd-"+o.version+"-linux-"+arch), []byte("binary for "+arch), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out, err := build(o)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	if want := filepath.Join(dist, "evictd-image-v1.2.3-4-gabcdef0.oci.tar"); out != want {
		t.Errorf("archive %s, want %s", out, want)
	}
	dir := untar(t, out)

	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("index.json lists %d manifests, want 1 (the multi-architecture index)", len(im.Manifests))
	}
	d := im.Manifests[0]
	if got := d.Annotations[annotationContainerdName]; got != "registry.example/evictd/evictd:v1.2.3-4-gabcdef0" {
		t.Errorf("containerd's name %q, want the full reference", got)
	}
	if got := d.Annotations[annotationRefName]; got != "v1.2.3-4-gabcdef0" {
		t.Errorf("ref name %q, want the tag", got)
	}
	idx, err := top.ImageIndex(d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	archIM, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range archIM.Manifests {
		arch := m.Platform.Architecture
		seen[arch] = true
		img, err := idx.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Architecture != arch || cfg.OS != "linux" || m.Platform.OS != "linux" {
			t.Errorf("%s: config says %s/%s, index %s/%s", arch, cfg.OS, cfg.Architecture, m.Platform.OS, arch)
		}
		if got := strings.Join(cfg.Config.Entrypoint, " "); got != "/usr/bin/evictd" || cfg.Config.User != "0:0" {
			t.Errorf("%s: entrypoint %q, user %q; want /usr/bin/evictd as 0:0", arch, got, cfg.Config.User)
		}
		if got := cfg.Config.Labels["org.opencontainers.image.version"]; got != o.version {
			t.Errorf("%s: version label %q, want %q", arch, got, o.version)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("%s: %d layers (%v), want 1", arch, len(layers), err)
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		files := readTar(t, rc)
		rc.Close()
		bin, ok := files["usr/bin/evictd"]
		if !ok || string(bin.data) != "binary for "+arch || bin.mode != 0o755 {
			t.Errorf("%s: /usr/bin/evictd %q mode %o (present %t), want its own binary, 0755", arch, bin.data, bin.mode, ok)
		}
	}
	if !seen["amd64"] || !seen["arm64"] || len(seen) != 2 {
		t.Errorf("architectures %v, want amd64 and arm64", seen)
	}

	// The same binaries give the same archive.
	first, _ := os.ReadFile(out)
	if _, err := build(o); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(out); !bytes.Equal(first, again) {
		t.Error("a second build of the same binaries differs")
	}
}

// TestBuildRefusals: a missing binary or a version that is no tag is
// refused with the value named, and no archive is left.
func TestBuildRefusals(t *testing.T) {
	dist := t.TempDir()
	for _, tc := range []struct {
		name string
		o    options
		want string
	}{
		{"no binary", options{version: "v1.0.0", repo: "r.example/evictd", dist: dist, arches: []string{"riscv64"}}, "the release binary for riscv64"},
		{"bad tag", options{version: "v1 0", repo: "r.example/evictd", dist: dist, arches: []string{"amd64"}}, `"r.example/evictd:v1 0"`},
		{"bad repo", options{version: "v1.0.0", repo: "R.example/Evictd", dist: dist, arches: []string{"amd64"}}, `"R.example/Evictd:v1.0.0"`},
		{"no arch", options{version: "v1.0.0", repo: "r.example/evictd", dist: dist}, "no architecture"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := build(tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error with %s", err, tc.want)
			}
			if _, err := os.Stat(tc.o.archive()); err == nil {
				t.Errorf("%s written", tc.o.archive())
			}
		})
	}
}

type tarFile struct {
	data []byte
	mode int64
}

func readTar(t *testing.T, r io.Reader) map[string]tarFile {
	t.Helper()
	files := map[string]tarFile{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = tarFile{data: data, mode: h.Mode}
	}
}

// untar unpacks the archive at path into a new directory.
func untar(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	for name, tf := range readTar(t, f) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, tf.data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
