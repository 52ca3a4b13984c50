package reclaim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/evictd/evictd/internal/decide"
)

// imageSeen is what a Reclaimer knows of an image: the CRI gives no image
// age, so, as the kubelet's image GC does, the age counts from when this
// Reclaimer first listed the image, and use from when it last saw a
// container of it.
type imageSeen struct {
	firstSeen, lastUsed time.Time
}

// removeUnusedImages removes every image that no container (running or not)
// uses, that the runtime does not pin, that is not the sandbox image, and
// that this Reclaimer has known for at least MinImageAge: least recently used
// first, then first seen first (the kubelet's DeleteUnusedImages). An image
// listed for the first time now is as young as can be: with MinImageAge > 0
// it stays until a later reclaim.
func (r *Reclaimer) removeUnusedImages(ctx context.Context, log *slog.Logger) decide.ReclaimAction {
	a := decide.ReclaimAction{Kind: decide.ReclaimImages}
	var images []*runtimeapi.Image
	var containers []*runtimeapi.Container
	err := r.call(ctx, func(ctx context.Context) (err error) {
		images, err = r.img.ListImages(ctx, nil)
		return err
	})
	if err != nil {
		a.Err = fmt.Errorf("reclaim images: list images: %w", err)
		return a
	}
	err = r.call(ctx, func(ctx context.Context) (err error) {
		containers, err = r.rt.ListContainers(ctx, nil)
		return err
	})
	if err != nil {
		// Without the containers, any image might be in use.
		a.Err = fmt.Errorf("reclaim images: list containers: %w", err)
		return a
	}
	victims, young := r.planImages(images, containers, r.cfg.Clock.Now())
	if young > 0 {
		log.Debug("unused images too young to remove", "count", young, "minimumAge", r.cfg.MinImageAge)
	}
	var errs []error
	for _, img := range victims {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		err := r.call(ctx, func(ctx context.Context) error {
			return r.img.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: img.GetId()})
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("remove image %s %v: %w", img.GetId(), img.GetRepoTags(), err))
			continue
		}
		delete(r.images, img.GetId())
		a.Removed++
		log.Debug("removed unused image", "image", img.GetId(), "tags", img.GetRepoTags(), "size", img.GetSize())
	}
	if len(errs) > 0 {
		a.Err = fmt.Errorf("reclaim images: %w", errors.Join(errs...))
	}
	return a
}

// planImages updates what r knows of the images listed at now and returns
// those to remove, in order, and how many unused ones are too young. r.mu is
// held.
func (r *Reclaimer) planImages(images []*runtimeapi.Image, containers []*runtimeapi.Container, now time.Time) (victims []*runtimeapi.Image, young int) {
	used := map[string]bool{}
	for _, c := range containers {
		for _, ref := range []string{c.GetImage().GetImage(), c.GetImageRef(), c.GetImageId()} {
			if ref != "" {
				used[ref] = true
			}
		}
	}
	listed := map[string]bool{}
	for _, img := range images {
		id := img.GetId()
		listed[id] = true
		seen := r.images[id]
		if seen == nil {
			seen = &imageSeen{firstSeen: now}
			r.images[id] = seen
		}
		switch {
		case anyRef(img, func(ref string) bool { return used[ref] }):
			seen.lastUsed = now
		case img.GetPinned() || r.cfg.SandboxImage != "" && anyRef(img, sameRef(r.cfg.SandboxImage)):
		case now.Sub(seen.firstSeen) < r.cfg.MinImageAge:
			young++
		default:
			victims = append(victims, img)
		}
	}
	for id := range r.images {
		if !listed[id] {
			delete(r.images, id)
		}
	}
	slices.SortFunc(victims, func(a, b *runtimeapi.Image) int {
		sa, sb := r.images[a.GetId()], r.images[b.GetId()]
		return cmp.Or(sa.lastUsed.Compare(sb.lastUsed), sa.firstSeen.Compare(sb.firstSeen), cmp.Compare(a.GetId(), b.GetId()))
	})
	return victims, young
}

// anyRef reports whether match holds for the image's ID, a tag or a digest.
func anyRef(img *runtimeapi.Image, match func(string) bool) bool {
	return match(img.GetId()) || slices.ContainsFunc(img.GetRepoTags(), match) || slices.ContainsFunc(img.GetRepoDigests(), match)
}

// sameRef returns a matcher of references equal to ref once both are
// normalized as the runtime reports them ("pause:3.10" is
// "docker.io/library/pause:3.10").
func sameRef(ref string) func(string) bool {
	want := normalizeRef(ref)
	return func(s string) bool { return s == ref || normalizeRef(s) == want }
}

// normalizeRef spells a short image reference in full: docker.io for a
// reference without a registry, library/ for an official image, :latest
// without a tag or digest. An image ID (sha256:…) is left as it is.
func normalizeRef(ref string) string {
	if strings.HasPrefix(ref, "sha256:") {
		return ref
	}
	name, rest := ref, ""
	if i := strings.IndexByte(ref, '@'); i >= 0 {
		name, rest = ref[:i], ref[i:]
	}
	if rest == "" {
		if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
			name, rest = name[:i], name[i:]
		} else {
			rest = ":latest"
		}
	}
	first, _, more := strings.Cut(name, "/")
	switch {
	case !more:
		name = "docker.io/library/" + name
	case !strings.ContainsAny(first, ".:") && first != "localhost":
		name = "docker.io/" + name
	}
	return name + rest
}
