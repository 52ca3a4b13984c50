package signals

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Source reads one group of signals (for example the two of one filesystem).
// It returns the observations it could make, stamped with now, or an error
// that covers every signal it provides.
type Source interface {
	Observe(ctx context.Context, now time.Time) ([]Observation, error)
}

// SourceFunc adapts a function to a Source.
type SourceFunc func(ctx context.Context, now time.Time) ([]Observation, error)

// Observe calls f.
func (f SourceFunc) Observe(ctx context.Context, now time.Time) ([]Observation, error) {
	return f(ctx, now)
}

// collectionKey is the context key of a Collect call's identity.
type collectionKey struct{}

// collections numbers Collect calls.
var collections atomic.Uint64

// CollectionOf returns the identity of the Collect call ctx belongs to, and
// false outside one. Sources that read the same thing for two signals
// (a filesystem's bytes and inodes) read it once per collection with it:
// never across two, so a later Collect (a pass, the fresh look after
// reclaim) always reads again.
func CollectionOf(ctx context.Context) (uint64, bool) {
	id, ok := ctx.Value(collectionKey{}).(uint64)
	return id, ok
}

// Collect asks every source once and merges what they saw. A source that
// fails, or an observation that fails Check, leaves its signals out and adds
// to the returned error; the other signals are still returned.
func Collect(ctx context.Context, now time.Time, sources []Source) (Observations, error) {
	ctx = context.WithValue(ctx, collectionKey{}, collections.Add(1))
	obs := make(Observations, len(All()))
	var errs []error
	for _, src := range sources {
		got, err := src.Observe(ctx, now)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, o := range got {
			if err := o.Check(); err != nil {
				errs = append(errs, err)
				continue
			}
			if _, dup := obs[o.Signal]; dup {
				errs = append(errs, fmt.Errorf("%s observed by two sources; keeping the first", o.Signal))
				continue
			}
			obs[o.Signal] = o
		}
	}
	return obs, errors.Join(errs...)
}

// DeriveContainerFs fills the containerfs.* signals, when no source observed
// them, from the filesystem that holds the containers' writable layers, as
// the kubelet does: imagefs when the image filesystem is the same as or
// dedicated for the containers, nodefs when the layout splits images off.
func DeriveContainerFs(obs Observations, layout FsLayout) {
	from := map[Signal]Signal{ContainerFsAvailable: ImageFsAvailable, ContainerFsInodesFree: ImageFsInodesFree}
	if layout == SplitImageFs {
		from = map[Signal]Signal{ContainerFsAvailable: NodeFsAvailable, ContainerFsInodesFree: NodeFsInodesFree}
	}
	for to, src := range from {
		if _, ok := obs[to]; ok {
			continue
		}
		if o, ok := obs[src]; ok {
			o.Signal = to
			obs[to] = o
		}
	}
}
