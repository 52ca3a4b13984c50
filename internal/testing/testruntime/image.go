package testruntime

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"time"
)

// OCI media types and the annotations that name an image in an image layout
// (the image-spec's own, and containerd's, which `ctr images import` takes as
// the image's full reference).
const (
	mediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	mediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	mediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"

	annotationRefName        = "org.opencontainers.image.ref.name"
	annotationContainerdName = "io.containerd.image.name"
)

// The workload binary's path in every image.
const workloadPath = "/workload"

// layerTime is the modification time of every file in a layer, so that the
// same binary always gives the same layer (shared by every image).
var layerTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// The OCI structures this package writes (image-spec v1.1), with only the
// fields it sets.
type (
	descriptor struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Size        int64             `json:"size"`
		Annotations map[string]string `json:"annotations,omitempty"`
		Platform    *platform         `json:"platform,omitempty"`
	}
	platform struct {
		Architecture string `json:"architecture"`
		OS           string `json:"os"`
	}
	index struct {
		SchemaVersion int          `json:"schemaVersion"`
		MediaType     string       `json:"mediaType"`
		Manifests     []descriptor `json:"manifests"`
	}
	manifest struct {
		SchemaVersion int          `json:"schemaVersion"`
		MediaType     string       `json:"mediaType"`
		Config        descriptor   `json:"config"`
		Layers        []descriptor `json:"layers"`
	}
	imageConfig struct {
		Architecture string         `json:"architecture"`
		OS           string         `json:"os"`
		Config       containerSpec  `json:"config"`
		RootFS       imageRootFS    `json:"rootfs"`
		Created      *time.Time     `json:"created,omitempty"`
		History      []imageHistory `json:"history,omitempty"`
	}
	containerSpec struct {
		Entrypoint []string `json:"Entrypoint"`
		Cmd        []string `json:"Cmd,omitempty"`
		Env        []string `json:"Env,omitempty"`
	}
	imageRootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	}
	imageHistory struct {
		CreatedBy string `json:"created_by"`
	}
)

// imageSpec describes an image to build from the workload binary.
type imageSpec struct {
	ref      string   // full reference, e.g. "evictd.test/workload:1"
	cmd      []string // the config's Cmd; the Entrypoint is /workload
	extraMiB int      // size of an extra layer of incompressible data; 0: none
}

// blob is one content-addressed file of the layout.
type blob struct {
	desc descriptor
	path string // a temporary file holding it, or
	data []byte // its bytes
}

// writeImage writes an OCI image layout tarball of spec to w: oci-layout,
// index.json (whose one manifest is annotated with spec.ref) and
// blobs/sha256/*. Layers are staged as temporary files in tmpDir and removed
// before it returns. The first layer holds the workload binary at /workload
// and the empty directories a container needs; the optional second one a
// file /filler of spec.extraMiB MiB of pseudo-random bytes drawn from the
// reference, so different images never share it and neither gzip nor a
// filesystem shrinks it.
func writeImage(w io.Writer, tmpDir, workload string, spec imageSpec) error {
	var staged []string
	defer func() {
		for _, p := range staged {
			os.Remove(p)
		}
	}()
	base, err := writeLayer(tmpDir, gzip.BestSpeed, func(tw *tar.Writer) error {
		return addWorkload(tw, workload)
	})
	if err != nil {
		return fmt.Errorf("layer with %s: %w", workload, err)
	}
	staged = append(staged, base.path)
	layers := []layer{base}
	if spec.extraMiB > 0 {
		seed := sha256.Sum256([]byte(spec.ref))
		extra, err := writeLayer(tmpDir, gzip.NoCompression, func(tw *tar.Writer) error {
			size := int64(spec.extraMiB) << 20
			hdr := &tar.Header{Typeflag: tar.TypeReg, Name: "filler", Mode: 0o644, Size: size, ModTime: layerTime}
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			_, err := io.CopyN(tw, rand.NewChaCha8(seed), size)
			return err
		})
		if err != nil {
			return fmt.Errorf("extra layer of %d MiB: %w", spec.extraMiB, err)
		}
		staged = append(staged, extra.path)
		layers = append(layers, extra)
	}

	cfg := imageConfig{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Config:       containerSpec{Entrypoint: []string{workloadPath}, Cmd: spec.cmd, Env: []string{"PATH=/"}},
		RootFS:       imageRootFS{Type: "layers"},
		Created:      &layerTime,
	}
	var blobs []blob
	var layerDescs []descriptor
	for _, l := range layers {
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, l.diffID)
		cfg.History = append(cfg.History, imageHistory{CreatedBy: "evictd internal/testing/testruntime"})
		layerDescs = append(layerDescs, l.desc)
		blobs = append(blobs, l.blob)
	}
	cfgBlob, err := jsonBlob(mediaTypeConfig, cfg)
	if err != nil {
		return err
	}
	mfBlob, err := jsonBlob(mediaTypeManifest, manifest{
		SchemaVersion: 2, MediaType: mediaTypeManifest, Config: cfgBlob.desc, Layers: layerDescs,
	})
	if err != nil {
		return err
	}
	blobs = append(blobs, cfgBlob, mfBlob)

	mfDesc := mfBlob.desc
	mfDesc.Platform = &platform{Architecture: runtime.GOARCH, OS: "linux"}
	mfDesc.Annotations = map[string]string{annotationContainerdName: spec.ref, annotationRefName: refTag(spec.ref)}
	idx, err := json.Marshal(index{SchemaVersion: 2, MediaType: mediaTypeIndex, Manifests: []descriptor{mfDesc}})
	if err != nil {
		return err
	}

	tw := tar.NewWriter(w)
	if err := addBytes(tw, "oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := addBytes(tw, "index.json", idx); err != nil {
		return err
	}
	for _, b := range blobs {
		if err := addBlob(tw, b); err != nil {
			return err
		}
	}
	return tw.Close()
}

// layer is a staged layer blob with its uncompressed digest.
type layer struct {
	blob
	diffID string
}

// writeLayer writes a gzip-compressed tar layer filled by fill to a
// temporary file in dir, hashing the compressed stream (the blob's digest)
// and the uncompressed one (the config's diff_id) as it goes.
func writeLayer(dir string, level int, fill func(*tar.Writer) error) (layer, error) {
	f, err := os.CreateTemp(dir, "layer-*.tar.gz")
	if err != nil {
		return layer{}, err
	}
	blobHash, diffHash := sha256.New(), sha256.New()
	gz, err := gzip.NewWriterLevel(io.MultiWriter(f, blobHash), level)
	if err != nil {
		return layer{}, errorsJoinClose(err, f)
	}
	tw := tar.NewWriter(io.MultiWriter(gz, diffHash))
	err = fill(tw)
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = gz.Close()
	}
	if err != nil {
		return layer{}, errorsJoinClose(err, f)
	}
	fi, err := f.Stat()
	if err != nil {
		return layer{}, errorsJoinClose(err, f)
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return layer{}, err
	}
	return layer{
		blob:   blob{desc: descriptor{MediaType: mediaTypeLayer, Digest: digestOf(blobHash), Size: fi.Size()}, path: f.Name()},
		diffID: digestOf(diffHash),
	}, nil
}

// errorsJoinClose closes and removes a half-written staging file.
func errorsJoinClose(err error, f *os.File) error {
	f.Close()
	os.Remove(f.Name())
	return err
}

// addWorkload writes the base layer: the mount points and scratch
// directories a container expects, and the workload binary at /workload.
func addWorkload(tw *tar.Writer, workload string) error {
	for _, d := range []struct {
		name string
		mode int64
	}{{"dev/", 0o755}, {"etc/", 0o755}, {"proc/", 0o555}, {"sys/", 0o555}, {"tmp/", 0o1777}, {"data/", 0o755}} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d.name, Mode: d.mode, ModTime: layerTime}); err != nil {
			return err
		}
	}
	f, err := os.Open(workload)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(workloadPath, "/"), Mode: 0o755, Size: fi.Size(), ModTime: layerTime}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

// jsonBlob marshals v as a blob of the given media type.
func jsonBlob(mediaType string, v any) (blob, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return blob{}, err
	}
	sum := sha256.Sum256(data)
	return blob{desc: descriptor{MediaType: mediaType, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(data))}, data: data}, nil
}

func digestOf(h hash.Hash) string { return "sha256:" + hex.EncodeToString(h.Sum(nil)) }

func addBytes(tw *tar.Writer, name string, data []byte) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: layerTime}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

// addBlob writes b at blobs/sha256/<hex digest>.
func addBlob(tw *tar.Writer, b blob) error {
	name := "blobs/sha256/" + strings.TrimPrefix(b.desc.Digest, "sha256:")
	if b.path == "" {
		return addBytes(tw, name, b.data)
	}
	f, err := os.Open(b.path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: b.desc.Size, ModTime: layerTime}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}
