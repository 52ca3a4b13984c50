package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// binPath is where the image holds evictd, as the packages do.
const binPath = "/usr/bin/evictd"

// Annotations that name an image in an OCI layout: the image-spec's own (the
// tag) and containerd's, which `ctr images import` takes as the image's full
// reference.
const (
	annotationRefName        = "org.opencontainers.image.ref.name"
	annotationContainerdName = "io.containerd.image.name"
)

// epoch is the time of every file and of the image's creation: the same
// binaries always give the same image, digest included.
var epoch = time.Unix(0, 0).UTC()

// options says what image to build and where.
type options struct {
	version string   // evictd's version, the image's tag
	repo    string   // the repository, e.g. ghcr.io/evictd/evictd
	dist    string   // where the release binaries are and the archive goes
	arches  []string // the GOARCHes, each from <dist>/evictd-<version>-linux-<arch>
}

// ref is the image's full reference, repo:version, checked.
func (o options) ref() (name.Tag, error) {
	t, err := name.NewTag(o.repo+":"+o.version, name.StrictValidation)
	if err != nil {
		return name.Tag{}, fmt.Errorf("image reference %q: %w", o.repo+":"+o.version, err)
	}
	return t, nil
}

// archive is the path of the image archive build writes.
func (o options) archive() string {
	return filepath.Join(o.dist, "evictd-image-"+o.version+".oci.tar")
}

// build writes the image archive of o: an OCI image layout, as a tar file,
// whose index names one multi-architecture image index, repo:version, of
// one image per architecture. It returns the archive's path.
func build(o options) (string, error) {
	if len(o.arches) == 0 {
		return "", fmt.Errorf("no architecture to build an image for")
	}
	ref, err := o.ref()
	if err != nil {
		return "", err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range o.arches {
		bin := filepath.Join(o.dist, "evictd-"+o.version+"-linux-"+arch)
		img, err := image(bin, arch, o.version)
		if err != nil {
			return "", err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}},
		})
	}

	dir, err := os.MkdirTemp(o.dist, ".image-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return "", fmt.Errorf("write the image layout: %w", err)
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		annotationRefName:        ref.TagStr(),
		annotationContainerdName: ref.Name(),
	})); err != nil {
		return "", fmt.Errorf("write the image layout: %w", err)
	}
	out := o.archive()
	if err := tarDir(dir, out); err != nil {
		return "", err
	}
	return out, nil
}

// image is the image of one architecture: one layer holding the static
// binary bin at binPath, run as its entrypoint. The user is root (UID 0):
// evictd reads directories and sockets only root may (the kubelet's root,
// the runtime's socket) and writes the memory cgroup's event_control;
// deploy/daemonset.yaml drops every capability but the one it needs.
func image(bin, arch, version string) (v1.Image, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("the release binary for %s: %w", arch, err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"usr/", "usr/bin/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: epoch}); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: binPath[1:], Mode: 0o755, Size: int64(len(data)), ModTime: epoch}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("the layer of %s: %w", bin, err)
	}

	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{
		Created:   v1.Time{Time: epoch},
		CreatedBy: "evictd " + version + " (hack/image)",
	}})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", arch
	cfg.Created = v1.Time{Time: epoch}
	cfg.Config.Entrypoint = []string{binPath}
	cfg.Config.Cmd = nil
	cfg.Config.User = "0:0"
	cfg.Config.WorkingDir = "/"
	cfg.Config.Labels = map[string]string{
		"org.opencontainers.image.title":    "evictd",
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.source":   "https://github.com/evictd/evictd",
	}
	return mutate.ConfigFile(img, cfg)
}

// tarDir writes the files under dir to a tar file at out (written beside
// it, then renamed), with their paths relative to dir.
func tarDir(dir, out string) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(out), ".image-*.tar")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	tw := tar.NewWriter(tmp)
	err = filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(fi, "")
		if err != nil {
			return err
		}
		h.Name, h.ModTime = filepath.ToSlash(rel), epoch
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		if fi.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return fmt.Errorf("archive the image layout: %w", err)
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), out)
}
