package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	evictdagent "github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/config"
	"github.com/evictd/evictd/internal/cri"
	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/signals/host"
)

// The capacities check-config compares the thresholds with: the ones the
// --node-* flags give, or this machine's, read as the agent reads them at
// start; and, for each signal a threshold watches, the capacity or why it
// is not checked.

// capacities are the signals' capacities the thresholds are checked
// against, as observations, with the layout and what the document says
// of them.
type capacities struct {
	obs    signals.Observations
	layout signals.FsLayout
	docs   []capacityDoc
	notes  []string
	// node names what was checked: "this node" or "the node given".
	node string
}

// capacitiesOf returns given's capacities, or when none is given this
// machine's, for the signals of cfg's thresholds.
func capacitiesOf(cfg *config.Config, given nodeCapacity) capacities {
	if given.given() {
		return givenCapacities(cfg, given)
	}
	c := capacities{obs: signals.Observations{}, node: "this node"}
	why := map[signals.Signal]string{}
	hc := evictdagent.HostConfig(cfg)
	fs := host.NewFilesystems()
	sources, err := host.Sources(hc, fs)
	if err == nil {
		c.layout, err = evictdagent.LayoutOf(hc, fs)
	}
	if err != nil {
		c.notes = append(c.notes, fmt.Sprintf("cannot observe this machine's signals, so no threshold is checked against its capacities: %v", err))
		c.docs = capacityDocs(cfg, c, func(signals.Signal) string { return "this machine's signals cannot be observed: " + err.Error() })
		return c
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.RuntimeRequestTimeout)
	defer cancel()
	if cfg.ImageFSPath == "" {
		// As the agent: the image filesystem and the layout from the
		// container runtime.
		rt, layout, err := runtimeImageFs(ctx, cfg, fs)
		if err != nil {
			for _, s := range []signals.Signal{signals.ImageFsAvailable, signals.ImageFsInodesFree} {
				why[s] = "the agent asks the container runtime for the image filesystem (no --imagefs-path), which cannot be reached: " + err.Error()
			}
		} else {
			defer rt.Close()
			sources = append(sources, rt.source)
			c.layout = layout
		}
	}
	obs, collectErr := signals.Collect(ctx, time.Now(), sources)
	signals.DeriveContainerFs(obs, c.layout)
	c.obs = obs
	var errs []error
	if j, ok := collectErr.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else if collectErr != nil {
		errs = []error{collectErr}
	}
	var reason func(signals.Signal) string
	reason = func(s signals.Signal) string {
		if w, ok := why[s]; ok {
			return w
		}
		if from, ok := containerFsFrom(s, c.layout); ok {
			return fmt.Sprintf("derived from %s: %s", from, reason(from))
		}
		for _, e := range errs {
			if strings.HasPrefix(e.Error(), string(s)+":") || strings.HasPrefix(e.Error(), string(s)+" ") {
				return "not observed on this machine: " + e.Error()
			}
		}
		return "not observed on this machine"
	}
	c.docs = capacityDocs(cfg, c, reason)
	return c
}

// runtimeImage is the container runtime's image filesystem source, and
// its connection to close.
type runtimeImage struct {
	*cri.Client
	source *cri.ImageFsSource
}

// runtimeImageFs connects to the container runtime as the agent does and
// returns its image filesystem's source and the node's layout.
func runtimeImageFs(ctx context.Context, cfg *config.Config, fs *host.Filesystems) (runtimeImage, signals.FsLayout, error) {
	c, err := cri.Dial(ctx, cfg.ContainerRuntimeEndpoint, cfg.ImageServiceEndpoint, cfg.RuntimeRequestTimeout, nil)
	if err != nil {
		return runtimeImage{}, signals.SingleFs, err
	}
	src, err := cri.NewImageFsSource(c, fs)
	if err != nil {
		return runtimeImage{}, signals.SingleFs, errors.Join(err, c.Close())
	}
	layout, err := cri.Layout(ctx, c, fs, cfg.RootDir)
	if err != nil {
		return runtimeImage{}, signals.SingleFs, errors.Join(err, c.Close())
	}
	return runtimeImage{Client: c, source: src}, layout, nil
}

// containerFsFrom is the signal a containerfs signal is observed as for
// layout (signals.DeriveContainerFs).
func containerFsFrom(s signals.Signal, layout signals.FsLayout) (signals.Signal, bool) {
	avail, inodes := signals.ImageFsAvailable, signals.ImageFsInodesFree
	if layout == signals.SplitImageFs {
		avail, inodes = signals.NodeFsAvailable, signals.NodeFsInodesFree
	}
	switch s {
	case signals.ContainerFsAvailable:
		return avail, true
	case signals.ContainerFsInodesFree:
		return inodes, true
	}
	return "", false
}

// givenCapacities makes observations of the capacities the --node-*
// flags give, for a node whose images share the kubelet's filesystem.
func givenCapacities(cfg *config.Config, g nodeCapacity) capacities {
	c := capacities{obs: signals.Observations{}, layout: signals.SingleFs, node: "the node given"}
	from := map[signals.Signal]string{}
	set := func(v int64, flag string, sigs ...signals.Signal) {
		if v <= 0 {
			return
		}
		for _, s := range sigs {
			c.obs[s] = signals.Observation{Signal: s, Available: v, Capacity: v, Time: time.Now()}
			from[s] = flag
		}
	}
	set(g.memory, "--node-memory", signals.MemoryAvailable)
	reserved := cfg.SystemReservedMemory + cfg.KubeReservedMemory
	allocatableWhy := "--node-memory not given"
	if g.memory > 0 && g.memory <= reserved {
		allocatableWhy = fmt.Sprintf("--system-reserved and --kube-reserved memory (%s) leave nothing of --node-memory (%s)",
			amount(signals.MemoryAvailable, reserved), amount(signals.MemoryAvailable, g.memory))
	} else {
		set(g.memory-reserved, "--node-memory less reserved memory", signals.AllocatableMemoryAvailable)
	}
	set(g.disk, "--node-disk", signals.NodeFsAvailable, signals.ImageFsAvailable, signals.ContainerFsAvailable)
	set(g.inodes, "--node-inodes", signals.NodeFsInodesFree, signals.ImageFsInodesFree, signals.ContainerFsInodesFree)
	set(g.pids, "--node-pids", signals.PIDAvailable)
	flagOf := map[signals.Resource]string{
		signals.ResourceMemory: "--node-memory", signals.ResourceEphemeralStorage: "--node-disk",
		signals.ResourceInodes: "--node-inodes", signals.ResourcePIDs: "--node-pids",
	}
	c.docs = capacityDocs(cfg, c, func(s signals.Signal) string {
		if s == signals.AllocatableMemoryAvailable {
			return allocatableWhy
		}
		return flagOf[s.Resource()] + " not given (this machine's capacities are not used once any --node-* flag is)"
	})
	for i := range c.docs {
		if c.docs[i].Checked {
			c.docs[i].From = from[c.docs[i].Signal]
		}
	}
	return c
}

// capacityDocs lists, in signal order, the capacity of each signal that a
// threshold in force watches (stall signals aside: a share of time has no
// capacity to exceed), or why it is not checked.
func capacityDocs(cfg *config.Config, c capacities, why func(signals.Signal) string) []capacityDoc {
	watched := map[signals.Signal]bool{}
	for _, th := range thresholdsFor(cfg, c.layout) {
		watched[th] = true
	}
	docs := []capacityDoc{}
	for _, s := range signals.All() {
		if !watched[s] || s.Stall() {
			continue
		}
		d := capacityDoc{Signal: s}
		if o, ok := c.obs[s]; ok && o.Capacity > 0 {
			capacity := o.Capacity
			d.Checked, d.Capacity, d.From = true, &capacity, "this node"
		} else {
			d.Reason = why(s)
		}
		docs = append(docs, d)
	}
	return docs
}

// thresholdsFor lists the signals of cfg's thresholds in force for
// layout, the containerfs ones derived included.
func thresholdsFor(cfg *config.Config, layout signals.FsLayout) []signals.Signal {
	var out []signals.Signal
	for _, d := range thresholdDocs(cfg, layout, nil) {
		out = append(out, d.Signal)
	}
	return out
}
