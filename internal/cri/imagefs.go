package cri

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/signals/host"
)

// Filesystem is one filesystem as the runtime reports it in ImageFsInfo.
type Filesystem struct {
	// Mountpoint is the directory the runtime names (containerd: its
	// snapshotter's directory, not necessarily a mount point).
	Mountpoint string
	// UsedBytes and InodesUsed are what the runtime says its data uses
	// there, nil when not reported. containerd 1.6 counts only snapshots,
	// not content blobs, so these are not the filesystem's usage: measure
	// the filesystem at Mountpoint for that.
	UsedBytes, InodesUsed *uint64
}

// FsInfo is the runtime's answer to ImageFsInfo.
type FsInfo struct {
	// Images holds the filesystems of the image store.
	Images []Filesystem
	// Containers holds the filesystems of the containers' writable layers,
	// when the runtime reports them apart (CRI v1.29+; containerd 1.6 does
	// not).
	Containers []Filesystem
}

// Filesystems asks the runtime where it keeps images and writable layers.
func (c *Client) Filesystems(ctx context.Context) (FsInfo, error) {
	resp, err := c.imageFsInfo(ctx)
	if err != nil {
		return FsInfo{}, err
	}
	info, err := fsInfoOf(resp)
	if err != nil {
		return FsInfo{}, fmt.Errorf("CRI ImageFsInfo at %s: %w", c.imageEndpoint, err)
	}
	return info, nil
}

// fsInfoOf reads the runtime's answer to ImageFsInfo.
func fsInfoOf(resp *runtimeapi.ImageFsInfoResponse) (FsInfo, error) {
	info := FsInfo{
		Images:     filesystems(resp.GetImageFilesystems()),
		Containers: filesystems(resp.GetContainerFilesystems()),
	}
	if len(info.Images) == 0 {
		return FsInfo{}, errors.New("no image filesystem with a mountpoint")
	}
	return info, nil
}

func filesystems(in []*runtimeapi.FilesystemUsage) []Filesystem {
	var out []Filesystem
	for _, f := range in {
		mp := f.GetFsId().GetMountpoint()
		if mp == "" {
			continue
		}
		fs := Filesystem{Mountpoint: mp}
		if v := f.GetUsedBytes(); v != nil {
			fs.UsedBytes = &v.Value
		}
		if v := f.GetInodesUsed(); v != nil {
			fs.InodesUsed = &v.Value
		}
		out = append(out, fs)
	}
	return out
}

// ImageMountpoint is the directory of the first image filesystem.
func (i FsInfo) ImageMountpoint() string {
	if len(i.Images) == 0 {
		return ""
	}
	return i.Images[0].Mountpoint
}

// ContainerMountpoint is the directory of the first container filesystem
// when it differs from the image filesystem's, "" when the runtime reports
// none or the same one (no split).
func (i FsInfo) ContainerMountpoint() string {
	if len(i.Containers) == 0 || i.Containers[0].Mountpoint == i.ImageMountpoint() {
		return ""
	}
	return i.Containers[0].Mountpoint
}

// Split reports whether the runtime keeps writable layers on another
// filesystem than images, as the kubelet's IsContainerFsSeparateFromImageFs
// decides it: both reported, with different mountpoints.
func (i FsInfo) Split() bool { return i.ContainerMountpoint() != "" }

// Layout decides the filesystem layout as the kubelet does on its first
// pass: SplitImageFs when the runtime reports container filesystems apart
// from its image filesystems, DedicatedImageFs when the image filesystem's
// device differs from that of kubeletRootDir (nodefs), SingleFs otherwise.
func Layout(ctx context.Context, c *Client, fs *host.Filesystems, kubeletRootDir string) (signals.FsLayout, error) {
	info, err := c.Filesystems(ctx)
	if err != nil {
		return signals.SingleFs, fmt.Errorf("filesystem layout: %w", err)
	}
	if info.Split() {
		return signals.SplitImageFs, nil
	}
	dedicated, err := fs.Dedicated(kubeletRootDir, info.ImageMountpoint())
	if err != nil {
		return signals.SingleFs, fmt.Errorf("filesystem layout: %w", err)
	}
	if dedicated {
		return signals.DedicatedImageFs, nil
	}
	return signals.SingleFs, nil
}

// ImageFsSource observes imagefs.available and imagefs.inodesFree on the
// filesystem the runtime names for its images, measured with statfs (not
// from the runtime's byte counts), and containerfs.available and
// containerfs.inodesFree on the container filesystem when the runtime
// reports one apart (the split layout; otherwise signals.DeriveContainerFs
// fills them).
//
// The first pass waits for the runtime's answer, within the client's
// timeout; no pass after it does, answered or not. A pass measures the
// filesystems of the last answer, and asks the runtime again in the
// background, one request at a time and at most every imageFsRefresh, so
// a moved or remounted store is followed within about a second while a
// pass costs two statfs calls, not a CRI round trip (0.6 ms of a 3 ms
// pass, docs/BENCHMARKS.md), and a frozen or absent runtime holds no pass
// but the first. When the runtime cannot answer, every signal the source
// provides is missing (an error naming the endpoint), never zero and never
// an old answer: from the pass after a request fails, or while a request
// has gone unanswered for longer than imageFsStale, until an answer.
type ImageFsSource struct {
	c  *Client
	fs *host.Filesystems

	mu      sync.Mutex
	info    FsInfo    // the last answer
	have    bool      // info holds an answer
	err     error     // the last request's error, nil once answered
	asking  bool      // a request is in flight
	askedAt time.Time // when the last request began; zero before the first
}

// imageFsRefresh is the least time between two ImageFsInfo requests.
const imageFsRefresh = time.Second

// imageFsStale is how long a request may go unanswered before the
// signals go missing (the request itself ends at the client's timeout).
const imageFsStale = 10 * time.Second

// NewImageFsSource returns the source; it is a second source of imagefs.*
// beside host.ImageFsSources(--imagefs-path): use one or the other.
func NewImageFsSource(c *Client, fs *host.Filesystems) (*ImageFsSource, error) {
	if c == nil || fs == nil {
		return nil, errors.New("image filesystem source: needs a CRI client and host.Filesystems")
	}
	return &ImageFsSource{c: c, fs: fs}, nil
}

// answer returns the runtime's last answer to use in this pass, asking
// for a new one as the type's comment says.
func (s *ImageFsSource) answer(ctx context.Context) (FsInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.askedAt.IsZero() {
		// The first pass: wait for the answer, within the client's
		// timeout.
		s.askedAt = time.Now()
		info, err := s.c.Filesystems(ctx)
		if err != nil {
			s.err = err
			return FsInfo{}, err
		}
		s.info, s.have = info, true
		return info, nil
	}
	if !s.asking && time.Since(s.askedAt) >= imageFsRefresh {
		s.asking, s.askedAt = true, time.Now()
		go s.refresh()
	}
	switch {
	case s.err != nil:
		return FsInfo{}, s.err
	case s.asking && time.Since(s.askedAt) > imageFsStale:
		return FsInfo{}, fmt.Errorf("CRI ImageFsInfo at %s: no answer for %s", s.c.imageEndpoint, time.Since(s.askedAt).Round(time.Second))
	case !s.have:
		return FsInfo{}, fmt.Errorf("CRI ImageFsInfo at %s: no answer yet", s.c.imageEndpoint)
	}
	return s.info, nil
}

// refresh asks the runtime in the background (answer started it) and
// keeps its answer or its error for the passes that follow.
func (s *ImageFsSource) refresh() {
	info, err := s.c.Filesystems(context.Background()) // bounded by the client's timeout
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asking, s.err = false, err
	if err == nil {
		s.info, s.have = info, true
	}
}

// Observe reads the signals, stamped with now.
func (s *ImageFsSource) Observe(ctx context.Context, now time.Time) ([]signals.Observation, error) {
	info, err := s.answer(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s, %s: %w", signals.ImageFsAvailable, signals.ImageFsInodesFree, err)
	}
	dirs := []struct {
		dir           string
		bytes, inodes signals.Signal
	}{{info.ImageMountpoint(), signals.ImageFsAvailable, signals.ImageFsInodesFree}}
	if cmp := info.ContainerMountpoint(); cmp != "" {
		dirs = append(dirs, struct {
			dir           string
			bytes, inodes signals.Signal
		}{cmp, signals.ContainerFsAvailable, signals.ContainerFsInodesFree})
	}
	var out []signals.Observation
	var errs []error
	for _, d := range dirs {
		for _, sig := range []signals.Signal{d.bytes, d.inodes} {
			src, err := host.NewFsSource(s.fs, d.dir, sig)
			if err != nil {
				errs = append(errs, fmt.Errorf("runtime's filesystem: %w", err))
				continue
			}
			obs, err := src.Observe(ctx, now)
			if err != nil {
				errs = append(errs, fmt.Errorf("runtime's filesystem at %s: %w", d.dir, err))
				continue
			}
			out = append(out, obs...)
		}
	}
	return out, errors.Join(errs...)
}
