package snapshot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// File is a snapshot as written on disk. Either Steps is set, or the
// top-level Observations and Pods describe a single moment.
type File struct {
	// APIVersion and Kind are set on a flight record (RecordAPIVersion,
	// RecordKind), which carries Record; a plain snapshot has neither.
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	// Args are evictd flags the scenario is meant to run with, such as
	// "--eviction-hard=memory.available<500Mi"; flags on the command line
	// override them.
	Args []string `json:"args,omitempty"`
	// Layout is the filesystem layout: single (default),
	// dedicated-imagefs or split-imagefs.
	Layout       string                     `json:"layout,omitempty"`
	Observations map[string]ObservationJSON `json:"observations,omitempty"`
	Pods         []PodJSON                  `json:"pods,omitempty"`
	// HugePages is the node's hugepage capacity, for a single moment:
	// see StepJSON.HugePages.
	HugePages map[string]Quantity `json:"hugepages,omitempty"`
	Steps     []StepJSON          `json:"steps,omitempty"`
	// Record is a flight record's decision and outcome (record.go).
	Record *Record `json:"record,omitempty"`
}

// StepJSON is the node at one moment of a sequence.
type StepJSON struct {
	// At is the time since the first step, as a Go duration ("30s").
	At           string                     `json:"at"`
	Observations map[string]ObservationJSON `json:"observations"`
	// Pods replaces the previous step's pods when present; when absent the
	// pods (and their usage) carry over.
	Pods []PodJSON `json:"pods,omitempty"`
	// HugePages is the node's hugepage capacity as the node's status lists
	// it, hugepages-<page size> → bytes ("hugepages-1Gi": "4Gi"), which
	// kubelet 1.37 subtracts from memory.available (HugepageAwareEviction).
	// memory.available is written as kubelet 1.36 reads it, the hugepages
	// left in. It replaces the previous step's when present ({} for none);
	// when absent it carries over.
	HugePages map[string]Quantity `json:"hugepages,omitempty"`
}

// ObservationJSON is one signal's reading: available and capacity, or,
// for a memory.pressure.* stall signal, stall alone.
type ObservationJSON struct {
	Available Quantity `json:"available,omitzero"`
	Capacity  Quantity `json:"capacity,omitzero"`
	// Stall is a stall signal's reading, a percentage of time as PSI
	// prints it: 35.5, "35.5" or "35.5%".
	Stall *Stall `json:"stall,omitempty"`
	// Local, for a stall signal only, says the stall was not corroborated
	// as the node's (the node reclaimed nothing for itself and kubepods
	// reached no limit of its own over the window): its thresholds are not
	// met. Absent, the stall counts as the node's, as before.
	Local bool `json:"local,omitempty"`
	// Age says how long before the step the reading was taken ("0s" by
	// default); a reading older than the previous step's is stale.
	Age string `json:"age,omitempty"`
}

// PodJSON is one pod of the node.
type PodJSON struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	UID       string `json:"uid,omitempty"`
	// QOS is Guaranteed, Burstable or BestEffort; computed from the
	// containers' requests and limits as Kubernetes does (qos.Class) when
	// absent.
	QOS       string `json:"qos,omitempty"`
	Priority  int32  `json:"priority,omitempty"`
	Static    bool   `json:"static,omitempty"`
	Mirror    bool   `json:"mirror,omitempty"`
	DaemonSet bool   `json:"daemonSet,omitempty"`
	// Spared, when not empty, says why the agent's pod source kept the
	// pod from eviction (standalone mode, which cannot read its priority
	// or requests): the pod counts as critical.
	Spared string `json:"spared,omitempty"`
	// Requests are the pod's effective requests; when absent, the sum of
	// the containers', or for a pod with pod-level Resources the
	// pod-level requests.
	Requests map[string]Quantity `json:"requests,omitempty"`
	// Resources are the pod-level resources (spec.resources, KEP-2837):
	// memory and cpu requests and limits. With them the containers'
	// requests no longer make the pod's, the QoS class is the pod-level
	// one, and a memory eviction's message states the pod's working set
	// against its pod-level memory request, as the kubelet's does.
	Resources                     *ResourcesJSON `json:"resources,omitempty"`
	TerminationGracePeriodSeconds *int64         `json:"terminationGracePeriodSeconds,omitempty"`
	LocalVolumes                  []string       `json:"localVolumes,omitempty"`
	// EmptyDirSizeLimits maps emptyDir volume names to their sizeLimit.
	EmptyDirSizeLimits map[string]Quantity `json:"emptyDirSizeLimits,omitempty"`
	Containers         []ContainerJSON     `json:"containers,omitempty"`
	// Usage is the pod's measured usage; a pod without it has no stats.
	Usage *PodUsageJSON `json:"usage,omitempty"`
}

// ResourcesJSON is a pod's pod-level requests and limits.
type ResourcesJSON struct {
	Requests map[string]Quantity `json:"requests,omitempty"`
	Limits   map[string]Quantity `json:"limits,omitempty"`
}

// ContainerJSON is one container of a pod.
type ContainerJSON struct {
	Name     string              `json:"name"`
	Requests map[string]Quantity `json:"requests,omitempty"`
	Limits   map[string]Quantity `json:"limits,omitempty"`
	Usage    *ContainerUsageJSON `json:"usage,omitempty"`
}

// ContainerUsageJSON is one container's measured usage.
type ContainerUsageJSON struct {
	Memory *Quantity    `json:"memory,omitempty"`
	Rootfs *FsUsageJSON `json:"rootfs,omitempty"`
	Logs   *FsUsageJSON `json:"logs,omitempty"`
}

// PodUsageJSON is a pod's measured usage.
type PodUsageJSON struct {
	// Memory is the pod's working set; the sum of the containers' when
	// absent and all of them have one.
	Memory    *Quantity              `json:"memory,omitempty"`
	Processes *int64                 `json:"processes,omitempty"`
	Volumes   map[string]FsUsageJSON `json:"volumes,omitempty"`
}

// FsUsageJSON is bytes and inodes on a filesystem.
type FsUsageJSON struct {
	Bytes  Quantity `json:"bytes"`
	Inodes Quantity `json:"inodes,omitempty"`
}

// Quantity is a Kubernetes quantity written as a string ("600Mi") or a
// plain JSON number of bytes or items.
type Quantity struct {
	Value int64
	Set   bool
	// exact is the quantity as written, which Value rounds; zero when
	// the Quantity was not read from JSON.
	exact resource.Quantity
}

// quantity is q as Kubernetes holds it: as written when q was read from
// JSON, so that a cpu request of "500m" stays below a limit of "1"; else
// Value.
func (q Quantity) quantity() resource.Quantity {
	if q.exact.IsZero() {
		return *resource.NewQuantity(q.Value, resource.DecimalSI)
	}
	return q.exact.DeepCopy()
}

// UnmarshalJSON accepts "600Mi", "1.5Gi", "1000" or 1000.
func (q *Quantity) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	var text string
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &text); err != nil {
			return err
		}
	} else {
		text = string(b)
		if _, err := strconv.ParseFloat(text, 64); err != nil {
			return fmt.Errorf("quantity %s is neither a string nor a number", text)
		}
	}
	parsed, err := thresholds.ParseQuantity(text)
	if err != nil {
		return fmt.Errorf("quantity %q: %w", text, err)
	}
	if parsed.Sign() < 0 {
		return fmt.Errorf("quantity %q is negative", text)
	}
	if f := parsed.AsApproximateFloat64(); f >= math.MaxInt64 {
		return fmt.Errorf("quantity %q is too large", text)
	}
	// Value rounds a fraction of a byte or an item up, as Kubernetes does.
	q.Value, q.Set, q.exact = parsed.Value(), true, parsed
	return nil
}

// Stall is a percentage of time in hundredths of a percent
// (signals.StallScale is 100%).
type Stall struct {
	Value int64
}

// UnmarshalJSON accepts 35.5, "35.5" or "35.5%": at most two decimals,
// between 0 and 100, no sign, exponent, NaN or infinity.
func (st *Stall) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	text := string(b)
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &text); err != nil {
			return err
		}
		text = strings.TrimSuffix(text, "%")
	}
	const want = "want a percentage of time from 0 to 100 with at most two decimals, such as 35.5"
	whole, frac, hasPoint := strings.Cut(text, ".")
	if whole == "" || len(whole) > 3 || !isDigits(whole) || (hasPoint && (frac == "" || len(frac) > 2 || !isDigits(frac))) {
		return fmt.Errorf("stall %s: %s", string(b), want)
	}
	w, _ := strconv.ParseInt(whole, 10, 64) // at most 3 digits
	var f int64
	if frac != "" {
		f, _ = strconv.ParseInt(frac, 10, 64) // at most 2 digits
		if len(frac) == 1 {
			f *= 10
		}
	}
	if v := w*100 + f; v <= signals.StallScale {
		st.Value = v
		return nil
	}
	return fmt.Errorf("stall %s: %s", string(b), want)
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func parseDuration(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", field, err)
	}
	if d < 0 {
		return 0, fmt.Errorf("%s: %q is negative", field, s)
	}
	return d, nil
}
