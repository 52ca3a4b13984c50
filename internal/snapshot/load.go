package snapshot

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/evictd/evictd/signals"
)

// Epoch is the time of a scenario's first step. Snapshots speak in offsets
// from it, so that replays are the same on every run.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// maxSize bounds what Read accepts: a node of 10,000 pods fits easily.
const maxSize = 64 << 20

// Scenario is a snapshot made ready to replay.
type Scenario struct {
	Args   []string
	Layout signals.FsLayout
	Steps  []Step
}

// Step is the node at one moment.
type Step struct {
	At           time.Duration
	Time         time.Time
	Observations signals.Observations
	Pods         []signals.Pod
	// Stats holds the usage of the pods that have any, by pod UID.
	Stats map[string]signals.PodStats
}

// ReadFile reads and checks the snapshot at path.
func ReadFile(path string) (*Scenario, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	defer f.Close()
	sc, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", path, err)
	}
	return sc, nil
}

// Read decodes a snapshot strictly (unknown fields are errors) and checks
// every value; the error names the field and the value at fault.
func Read(r io.Reader) (*Scenario, error) {
	dec := json.NewDecoder(io.LimitReader(r, maxSize+1))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if dec.More() {
		return nil, errors.New("decode: more than one JSON value")
	}
	return f.scenario()
}

func (f *File) scenario() (*Scenario, error) {
	sc := &Scenario{Args: f.Args}
	switch f.Layout {
	case "", "single":
		sc.Layout = signals.SingleFs
	case "dedicated-imagefs":
		sc.Layout = signals.DedicatedImageFs
	case "split-imagefs":
		sc.Layout = signals.SplitImageFs
	default:
		return nil, fmt.Errorf("layout %q: want single, dedicated-imagefs or split-imagefs", f.Layout)
	}
	steps := f.Steps
	switch {
	case len(steps) > 0 && (f.Observations != nil || f.Pods != nil):
		return nil, errors.New("give either steps or top-level observations and pods, not both")
	case len(steps) == 0:
		steps = []StepJSON{{At: "0s", Observations: f.Observations, Pods: f.Pods}}
	}

	var pods []signals.Pod
	var stats map[string]signals.PodStats
	for i, sj := range steps {
		field := fmt.Sprintf("steps[%d]", i)
		at, err := parseDuration(field+".at", sj.At)
		if err != nil {
			return nil, err
		}
		if i > 0 && at <= sc.Steps[i-1].At {
			return nil, fmt.Errorf("%s.at: %s is not after the previous step's %s", field, at, sc.Steps[i-1].At)
		}
		now := Epoch.Add(at)
		obs, err := observations(field, now, sj.Observations)
		if err != nil {
			return nil, err
		}
		if sj.Pods != nil || i == 0 {
			pods, stats, err = podsOf(field, now, sj.Pods)
			if err != nil {
				return nil, err
			}
		}
		sc.Steps = append(sc.Steps, Step{At: at, Time: now, Observations: obs, Pods: pods, Stats: stats})
	}
	return sc, nil
}

func observations(field string, now time.Time, in map[string]ObservationJSON) (signals.Observations, error) {
	obs := make(signals.Observations, len(in))
	// In sorted order, so that of two bad observations the error is
	// always about the same one.
	for _, name := range slices.Sorted(maps.Keys(in)) {
		oj := in[name]
		f := fmt.Sprintf("%s.observations[%q]", field, name)
		sig := signals.Signal(name)
		if !sig.Valid() {
			return nil, fmt.Errorf("%s: unsupported eviction signal %s", f, name)
		}
		switch {
		case sig.Stall() && (oj.Stall == nil || oj.Available.Set || oj.Capacity.Set):
			return nil, fmt.Errorf("%s: a stall signal takes stall (a percentage of time, such as 35.5) and neither available nor capacity", f)
		case sig.Stall():
			oj.Available, oj.Capacity = Quantity{Value: oj.Stall.Value, Set: true}, Quantity{Value: signals.StallScale, Set: true}
		case oj.Stall != nil:
			return nil, fmt.Errorf("%s: stall is for the memory.pressure.* signals only", f)
		case oj.Local:
			return nil, fmt.Errorf("%s: local is for the memory.pressure.* signals only", f)
		case !oj.Available.Set || !oj.Capacity.Set:
			return nil, fmt.Errorf("%s: available and capacity are both required", f)
		}
		age, err := parseDuration(f+".age", oj.Age)
		if err != nil {
			return nil, err
		}
		o := signals.Observation{Signal: sig, Available: oj.Available.Value, Capacity: oj.Capacity.Value, Time: now.Add(-age), Local: oj.Local}
		if err := o.Check(); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if o.Available > o.Capacity {
			return nil, fmt.Errorf("%s: available %d is more than capacity %d", f, o.Available, o.Capacity)
		}
		obs[sig] = o
	}
	return obs, nil
}
