package snapshot

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/signals"
)

// Epoch is the time of a scenario's first step. Snapshots speak in offsets
// from it, so that replays are the same on every run.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// maxSize bounds what Read accepts: a node of 10,000 pods fits easily.
const maxSize = 64 << 20

// Scenario is a snapshot made ready to replay.
type Scenario struct {
	// Record is the decision and outcome of a flight record; nil for a
	// plain snapshot.
	Record *Record
	Args   []string
	Layout signals.FsLayout
	Steps  []Step
	// Reads are a flight record's fast-poll readings (Record.Reads) at
	// their times, and Release the release estimate its decision was
	// predicted with (0 when none): what `evictd simulate` predicts
	// time to exhaustion with.
	Reads   []signals.Observation
	Release time.Duration
}

// Step is the node at one moment.
type Step struct {
	At   time.Duration
	Time time.Time
	// Observations are as the snapshot writes them: memory.available as
	// kubelet 1.36 computes it, the hugepages left in (ObservationsFor).
	Observations signals.Observations
	Pods         []signals.Pod
	// Stats holds the usage of the pods that have any, by pod UID.
	Stats map[string]signals.PodStats
	// HugePages is the node's hugepage capacity in bytes, every page
	// size together.
	HugePages int64
	// aware is Observations with memory.available less HugePages, when
	// that differs.
	aware signals.Observations
}

// ObservationsFor returns the step's observations with memory.available
// as kubelet 1.37 computes it when hugepageAware (HugepageAwareEviction on,
// the default: less the step's hugepages, signals.HugepageAware), or as
// kubelet 1.36 does, as written.
func (s Step) ObservationsFor(hugepageAware bool) signals.Observations {
	if hugepageAware && s.aware != nil {
		return s.aware
	}
	return s.Observations
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
	lr := &io.LimitedReader{R: r, N: maxSize + 1}
	dec := json.NewDecoder(lr)
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		if lr.N <= 0 {
			return nil, fmt.Errorf("larger than %d MiB, the most a snapshot may be", maxSize>>20)
		}
		return nil, fmt.Errorf("decode: %w", err)
	}
	if dec.More() {
		return nil, errors.New("decode: more than one JSON value")
	}
	return f.scenario()
}

func (f *File) scenario() (*Scenario, error) {
	sc := &Scenario{Args: f.Args, Record: f.Record}
	switch {
	case f.APIVersion == "" && f.Kind == "" && f.Record == nil:
	case f.APIVersion != RecordAPIVersion:
		return nil, fmt.Errorf("apiVersion %q: want %s (a flight record) or none", f.APIVersion, RecordAPIVersion)
	case f.Kind != RecordKind:
		return nil, fmt.Errorf("kind %q: want %s (a flight record) or none", f.Kind, RecordKind)
	case f.Record == nil:
		return nil, fmt.Errorf("a %s has no record", RecordKind)
	}
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
	case len(steps) > 0 && (f.Observations != nil || f.Pods != nil || f.HugePages != nil):
		return nil, errors.New("give either steps or top-level observations, pods and hugepages, not both")
	case len(steps) == 0:
		steps = []StepJSON{{At: "0s", Observations: f.Observations, Pods: f.Pods, HugePages: f.HugePages}}
	}

	var pods []signals.Pod
	var stats map[string]signals.PodStats
	var hugePages int64
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
		if sj.HugePages != nil {
			if hugePages, err = hugePagesOf(field, sj.HugePages); err != nil {
				return nil, err
			}
		}
		step := Step{At: at, Time: now, Observations: obs, Pods: pods, Stats: stats, HugePages: hugePages}
		if step.aware, err = hugepageAware(field, obs, hugePages); err != nil {
			return nil, err
		}
		sc.Steps = append(sc.Steps, step)
	}
	if f.Record != nil {
		var err error
		if sc.Reads, sc.Release, err = recordReads(f.Record); err != nil {
			return nil, err
		}
	}
	return sc, nil
}

// hugePagesOf sums a step's hugepages, hugepages-<page size> → bytes as the
// node's capacity lists them: each a whole number of its pages.
func hugePagesOf(field string, in map[string]Quantity) (int64, error) {
	var sum int64
	for _, name := range slices.Sorted(maps.Keys(in)) {
		f := fmt.Sprintf("%s.hugepages[%q]", field, name)
		size, ok := strings.CutPrefix(name, "hugepages-")
		page, err := resource.ParseQuantity(size)
		if !ok || err != nil || page.Sign() <= 0 {
			return 0, fmt.Errorf("%s: want hugepages-<page size> as the node's capacity names it, such as hugepages-2Mi or hugepages-1Gi", f)
		}
		q := in[name]
		if pv := page.Value(); pv <= 0 || q.Value%pv != 0 {
			written := q.quantity()
			return 0, fmt.Errorf("%s: %s is not a whole number of %s pages", f, written.String(), size)
		}
		if sum > math.MaxInt64-q.Value {
			return 0, fmt.Errorf("%s: the hugepages add up to more than %d bytes", f, int64(math.MaxInt64))
		}
		sum += q.Value
	}
	return sum, nil
}

// hugepageAware returns obs with memory.available less hugePages
// (signals.HugepageAware), or nil when that changes nothing. A
// memory.available the hugepages would leave without capacity is an error.
func hugepageAware(field string, obs signals.Observations, hugePages int64) (signals.Observations, error) {
	o, ok := obs[signals.MemoryAvailable]
	if !ok || hugePages == 0 {
		return nil, nil
	}
	adj, err := signals.HugepageAware(o, hugePages)
	if err != nil {
		return nil, fmt.Errorf("%s.observations[%q] with hugepages: %w", field, signals.MemoryAvailable, err)
	}
	out := maps.Clone(obs)
	out[signals.MemoryAvailable] = adj
	return out, nil
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
