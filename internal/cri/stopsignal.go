package cri

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"

	mobysignal "github.com/moby/sys/signal"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// annotationStopSignal is the OCI image-spec annotation of an image's
// STOPSIGNAL, which CRI-O writes into a container's runtime spec with the
// signal its stop sends: the CRI config's stop_signal, else the image's.
const annotationStopSignal = "org.opencontainers.image.stopSignal"

// stopSignalLookups bounds the ContainerStatus calls one listing makes to
// learn the stop signals of the containers it finds new: a node's first
// listings learn them over a few passes rather than in one long one.
const stopSignalLookups = 32

// runtimeCRIO is CRI-O's name in its Version answer.
const runtimeCRIO = "cri-o"

// stopSignalOf reads the signal the stop of runtime (its Version's
// RuntimeName) sends the container from its ContainerStatus answer (asked
// with verbose): the status's stop_signal (CRI v1.33+; containerd 2.1 and
// later always set it, from the container's config, else its image, else
// SIGTERM); else, from CRI-O, which leaves the field RUNTIME_DEFAULT, the
// org.opencontainers.image.stopSignal annotation of the runtime spec in
// its verbose info (no annotation: CRI-O sends SIGTERM). ok is false when
// the answer does not tell: containerd before 2.1, which may still send
// its image's STOPSIGNAL, or any other runtime leaving the field unset.
func stopSignalOf(runtime string, resp *runtimeapi.ContainerStatusResponse) (sig syscall.Signal, ok bool, err error) {
	if s := resp.GetStatus().GetStopSignal(); s != runtimeapi.Signal_RUNTIME_DEFAULT {
		sig, err := parseSignal(s.String())
		if err != nil {
			return 0, false, fmt.Errorf("stop_signal %d: %w", s, err)
		}
		return sig, true, nil
	}
	if runtime != runtimeCRIO {
		return 0, false, nil
	}
	raw, found := resp.GetInfo()["info"]
	if !found {
		return 0, false, nil
	}
	var info struct {
		RuntimeSpec *struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"runtimeSpec"`
	}
	if err := json.Unmarshal([]byte(raw), &info); err != nil {
		return 0, false, fmt.Errorf("verbose info: %w", err)
	}
	if info.RuntimeSpec == nil {
		return 0, false, nil
	}
	name, found := info.RuntimeSpec.Annotations[annotationStopSignal]
	if !found || name == "" {
		// CRI-O: no STOPSIGNAL in the image nor stop_signal in the
		// config, and CRI-O's stop sends SIGTERM.
		return syscall.SIGTERM, true, nil
	}
	if sig, err = parseSignal(name); err != nil {
		return 0, false, fmt.Errorf("annotation %s: %w", annotationStopSignal, err)
	}
	return sig, true, nil
}

// sigRTMax is the highest signal number Linux has.
const sigRTMax = 64

// parseSignal parses a signal as images (STOPSIGNAL: "SIGQUIT", "QUIT",
// "3", "SIGRTMIN+3") and the CRI's Signal enum ("SIGQUIT",
// "SIGRTMINPLUS3", "SIGRTMAXMINUS1"; since cri-api v0.37 with a SIGNAL_
// prefix, "SIGNAL_SIGQUIT") name it: the enum's spellings made the
// image's, then moby/sys/signal's ParseSignal, as containerd parses
// STOPSIGNAL (the real-time signals from glibc's SIGRTMIN, 34).
func parseSignal(s string) (syscall.Signal, error) {
	name := strings.ToUpper(strings.TrimSpace(s))
	name = strings.TrimPrefix(name, "SIGNAL_")
	for enum, image := range map[string]string{"RTMINPLUS": "RTMIN+", "RTMAXMINUS": "RTMAX-"} {
		if rest, found := strings.CutPrefix(strings.TrimPrefix(name, "SIG"), enum); found {
			name = image + rest
		}
	}
	sig, err := mobysignal.ParseSignal(name)
	if err != nil || sig < 1 || sig > sigRTMax {
		return 0, fmt.Errorf("signal %q: not a signal of Linux (a name such as SIGQUIT or RTMIN+3, or a number from 1 to %d)", s, sigRTMax)
	}
	return sig, nil
}

// stopSignals holds the stop signal of each running container the
// listings found, by container ID, as the runtime reported it.
type stopSignals struct {
	mu   sync.Mutex
	byID map[string]syscall.Signal
}

// get returns the stop signal of the container with id; ok is false when
// it is not known (not asked yet, or the runtime does not say).
func (s *stopSignals) get(id string) (syscall.Signal, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sig, ok := s.byID[id]
	return sig, ok && sig != 0
}

// learn asks runtime (its name, for stopSignalOf) the stop signals of the running containers it
// does not know yet, at most stopSignalLookups of them, and forgets those
// no longer running. A container whose runtime names none is remembered
// as such (0), so it is not asked again; one whose answer failed is
// asked again at the next listing. It returns the answers that failed.
func (s *stopSignals) learn(ctx context.Context, runtime string, status func(context.Context, string) (*runtimeapi.ContainerStatusResponse, error), containers []*runtimeapi.Container) error {
	s.mu.Lock()
	known := s.byID
	s.mu.Unlock()
	next := map[string]syscall.Signal{}
	var errs []error
	asked := 0
	for _, ctr := range containers {
		id := ctr.GetId()
		if ctr.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING || id == "" {
			continue
		}
		if sig, ok := known[id]; ok {
			next[id] = sig
			continue
		}
		if asked == stopSignalLookups {
			continue
		}
		asked++
		resp, err := status(ctx, id)
		if err != nil {
			errs = append(errs, fmt.Errorf("container %s: %w", id, err))
			continue
		}
		sig, ok, err := stopSignalOf(runtime, resp)
		if err != nil {
			errs = append(errs, fmt.Errorf("container %s's stop signal: %w", id, err))
		}
		if !ok {
			sig = 0
		}
		next[id] = sig
	}
	s.mu.Lock()
	s.byID = next
	s.mu.Unlock()
	if len(errs) > 0 {
		return fmt.Errorf("CRI ContainerStatus: %w", errors.Join(errs...))
	}
	return nil
}

// StopSignal returns the signal the runtime's stop sends the running
// container with id, as the runtime's ContainerStatus reported it; ok is
// false when the runtime has not said (not asked yet: a container is
// asked after the listing that first finds it running).
func (c *Client) StopSignal(id string) (syscall.Signal, bool) {
	return c.stopSignals.get(id)
}

// containerStatusVerbose calls ContainerStatus with verbose set, bounded by
// the client's timeout.
func (c *Client) containerStatusVerbose(ctx context.Context, id string) (*runtimeapi.ContainerStatusResponse, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	return c.rs.client.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
}
