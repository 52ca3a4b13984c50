package testruntime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// ImportImage builds an image named ref (a full reference with a registry
// host and a tag, e.g. "evictd.test/workload:1") holding the workload binary
// at /workload, Entrypoint ["/workload"] and Cmd ["sleep"], plus an extra
// layer of extraLayerMiB MiB of incompressible data when > 0, and imports it
// into Namespace, unpacked for the runtime's snapshotter. The image then
// takes about 2×extraLayerMiB MiB of the image filesystem (the compressed
// blob in the content store and its unpacked snapshot).
func (r *Runtime) ImportImage(ctx context.Context, ref string, extraLayerMiB int) error {
	if extraLayerMiB < 0 {
		return fmt.Errorf("import %s: negative extra layer size %d MiB", ref, extraLayerMiB)
	}
	return r.importImage(ctx, ref, []string{"sleep"}, extraLayerMiB)
}

// importImage streams the image's layout tarball into `ctr images import -`
// and checks that the image is then listed under ref.
func (r *Runtime) importImage(ctx context.Context, ref string, cmd []string, extraMiB int) error {
	if err := checkRef(ref); err != nil {
		return err
	}
	pr, pw := io.Pipe()
	built := make(chan error, 1)
	go func() {
		err := writeImage(pw, r.dir, r.workload, imageSpec{ref: ref, cmd: cmd, extraMiB: extraMiB})
		pw.CloseWithError(err)
		built <- err
	}()
	_, err := runCommandContext(ctx, pr, r.bin("ctr"), r.ctrArgs(r.importArgs("-")...)...)
	pr.CloseWithError(errors.New("ctr exited")) // unblocks the writer if ctr stopped reading
	if berr := <-built; berr != nil {
		return fmt.Errorf("build image %s: %w", ref, berr)
	}
	if err != nil {
		return fmt.Errorf("import image %s: %w", ref, err)
	}
	images, err := r.Images(ctx)
	if err != nil {
		return err
	}
	if !slices.Contains(images, ref) {
		return fmt.Errorf("import image %s: imported, but `ctr images ls` lists only %q", ref, images)
	}
	return nil
}

// Images returns the references of the images in Namespace, sorted, as
// `ctr images ls` lists them (the CRI adds one named by the image ID,
// sha256:<config digest>, for each image it sees).
func (r *Runtime) Images(ctx context.Context) ([]string, error) {
	out, err := runCommandContext(ctx, nil, r.bin("ctr"), r.ctrArgs("images", "ls", "-q")...)
	if err != nil {
		return nil, err
	}
	images := strings.Fields(out)
	slices.Sort(images)
	return images, nil
}

// importArgs are ctr's arguments to import the archive at path ("-":
// standard input) for the runtime's snapshotter. containerd 2's ctr imports
// through the daemon's transfer service unless told --local, and that
// service unpacks only for the platforms and snapshotters of its
// unpack_config (by default the default snapshotter's): an import for the
// native snapshotter failed with "no unpack platforms defined". --local
// imports as containerd 1.6's ctr does, in ctr.
func (r *Runtime) importArgs(path string) []string {
	args := []string{"images", "import", "--snapshotter", r.snapshotter}
	if r.configVersion >= 3 {
		args = append(args, "--local")
	}
	return append(args, path)
}

func (r *Runtime) ctrArgs(args ...string) []string {
	return append([]string{"--address", r.socket, "--namespace", Namespace}, args...)
}

// checkRef accepts a full image reference with a registry host and a tag,
// like "evictd.test/workload:1": the CRI resolves a short name such as
// "workload:1" to docker.io/library/workload:1, which would not find an image
// imported under the short name.
func checkRef(ref string) error {
	host, rest, ok := strings.Cut(ref, "/")
	if !ok || !(strings.ContainsAny(host, ".:") || host == "localhost") {
		return fmt.Errorf("image reference %q: want a registry host first, e.g. evictd.test/%s", ref, ref)
	}
	if refTag(ref) == "" || strings.Contains(rest, "@") {
		return fmt.Errorf("image reference %q: want a tag (and no digest), e.g. %s:1", ref, ref)
	}
	if ref != strings.ToLower(ref) || strings.ContainsAny(ref, " \t\n") {
		return fmt.Errorf("image reference %q: want lower case without spaces", ref)
	}
	return nil
}

// refTag returns the tag of a reference ("1" of "evictd.test/workload:1"), or
// "" if it has none.
func refTag(ref string) string {
	last := ref[strings.LastIndex(ref, "/")+1:]
	if _, tag, ok := strings.Cut(last, ":"); ok {
		return tag
	}
	return ""
}

// ImportArchive imports the image archive at path (an OCI image layout or a
// `docker save` tarball, as `ctr images import` takes them) into Namespace,
// unpacked for the runtime's snapshotter and this machine's platform, and
// checks that ref is then listed.
func (r *Runtime) ImportArchive(ctx context.Context, path, ref string) error {
	if err := checkRef(ref); err != nil {
		return err
	}
	if _, err := runCommandContext(ctx, nil, r.bin("ctr"), r.ctrArgs(r.importArgs(path)...)...); err != nil {
		return fmt.Errorf("import image archive %s: %w", path, err)
	}
	images, err := r.Images(ctx)
	if err != nil {
		return err
	}
	if !slices.Contains(images, ref) {
		return fmt.Errorf("import image archive %s: imported, but `ctr images ls` lists %q, not %s", path, images, ref)
	}
	return nil
}
