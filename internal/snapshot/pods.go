package snapshot

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/evictd/evictd/internal/qos"
	"github.com/evictd/evictd/signals"
)

// The resource names a snapshot's requests and limits may use.
const (
	resMemory           = "memory"
	resCPU              = "cpu"
	resEphemeralStorage = "ephemeral-storage"
)

func podsOf(field string, now time.Time, in []PodJSON) ([]signals.Pod, map[string]signals.PodStats, error) {
	pods := make([]signals.Pod, 0, len(in))
	stats := make(map[string]signals.PodStats, len(in))
	seen := map[string]bool{}
	for i, pj := range in {
		f := fmt.Sprintf("%s.pods[%d]", field, i)
		pod, st, err := podOf(f, now, pj)
		if err != nil {
			return nil, nil, err
		}
		if seen[pod.UID] {
			return nil, nil, fmt.Errorf("%s: pod %s (uid %s) appears twice", f, pod.Ref(), pod.UID)
		}
		seen[pod.UID] = true
		pods = append(pods, pod)
		if st != nil {
			stats[pod.UID] = *st
		}
	}
	return pods, stats, nil
}

func podOf(f string, now time.Time, pj PodJSON) (signals.Pod, *signals.PodStats, error) {
	if pj.Name == "" {
		return signals.Pod{}, nil, fmt.Errorf("%s.name is required", f)
	}
	pod := signals.Pod{
		Namespace: pj.Namespace, Name: pj.Name, UID: pj.UID,
		Priority: pj.Priority, Static: pj.Static, Mirror: pj.Mirror, DaemonSet: pj.DaemonSet, Spared: pj.Spared,
		TerminationGracePeriodSeconds: pj.TerminationGracePeriodSeconds,
		LocalVolumes:                  pj.LocalVolumes,
	}
	if pod.Namespace == "" {
		pod.Namespace = "default"
	}
	if pod.UID == "" {
		pod.UID = pod.Namespace + "/" + pod.Name
	}
	if err := checkNames(f, pod); err != nil {
		return pod, nil, err
	}
	if len(pj.Spared) > maxSpared || strings.IndexFunc(pj.Spared, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return pod, nil, fmt.Errorf("%s.spared %q: want at most %d printable characters", f, pj.Spared, maxSpared)
	}
	if g := pj.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		return pod, nil, fmt.Errorf("%s.terminationGracePeriodSeconds: %d is negative", f, *g)
	}
	for _, r := range []map[string]Quantity{pj.Requests} {
		if err := checkResources(f+".requests", r); err != nil {
			return pod, nil, err
		}
	}
	if pj.Resources != nil {
		if err := checkPodLevel(f+".resources", *pj.Resources); err != nil {
			return pod, nil, err
		}
	}
	seen := map[string]bool{}
	for i, cj := range pj.Containers {
		cf := fmt.Sprintf("%s.containers[%d]", f, i)
		if cj.Name == "" {
			return pod, nil, fmt.Errorf("%s.name is required", cf)
		}
		if msgs := validation.IsDNS1123Label(cj.Name); len(msgs) > 0 {
			return pod, nil, fmt.Errorf("%s.name %q: %s", cf, cj.Name, strings.Join(msgs, "; "))
		}
		if seen[cj.Name] {
			return pod, nil, fmt.Errorf("%s: container %q appears twice", cf, cj.Name)
		}
		seen[cj.Name] = true
		if err := checkResources(cf+".requests", cj.Requests); err != nil {
			return pod, nil, err
		}
		if err := checkResources(cf+".limits", cj.Limits); err != nil {
			return pod, nil, err
		}
		pod.Containers = append(pod.Containers, signals.Container{
			Name:                    cj.Name,
			MemoryRequest:           cj.Requests[resMemory].Value,
			EphemeralStorageRequest: cj.Requests[resEphemeralStorage].Value,
			EphemeralStorageLimit:   cj.Limits[resEphemeralStorage].Value,
		})
		// The pod's limit is the sum of the containers' when any has one.
		if l := cj.Limits[resEphemeralStorage].Value; l > 0 {
			pod.EphemeralStorageLimit = signals.AddSat(pod.EphemeralStorageLimit, l)
		}
		pod.MemoryRequest = signals.AddSat(pod.MemoryRequest, cj.Requests[resMemory].Value)
		pod.EphemeralStorageRequest = signals.AddSat(pod.EphemeralStorageRequest, cj.Requests[resEphemeralStorage].Value)
	}
	api := apiPod(pj)
	if defaulted := qos.WithDefaults(api); resourcehelper.IsPodLevelResourcesSet(defaulted) {
		// The kubelet's requests of a pod with pod-level resources are
		// the pod-level ones alone (podsource.Convert): no
		// ephemeral-storage, and memory only when the pod-level
		// resources give it, the API server's defaults applied.
		pod.MemoryRequest, pod.EphemeralStorageRequest = 0, 0
		if q, ok := defaulted.Spec.Resources.Requests[v1.ResourceMemory]; ok {
			pod.MemoryRequest = bytesOf(q)
			pod.PodLevelMemoryRequest = &signals.Request{Bytes: pod.MemoryRequest, Text: q.String()}
		}
	}
	if q, ok := pj.Requests[resMemory]; ok {
		pod.MemoryRequest = q.Value
	}
	if q, ok := pj.Requests[resEphemeralStorage]; ok {
		pod.EphemeralStorageRequest = q.Value
	}

	for name, q := range pj.EmptyDirSizeLimits {
		if q.Value <= 0 {
			continue
		}
		if pod.EmptyDirLimits == nil {
			pod.EmptyDirLimits = map[string]int64{}
		}
		pod.EmptyDirLimits[name] = q.Value
	}

	switch signals.QOSClass(pj.QOS) {
	case signals.Guaranteed, signals.Burstable, signals.BestEffort:
		pod.QOS = signals.QOSClass(pj.QOS)
	case "":
		pod.QOS = signals.QOSClass(qos.Class(api))
	default:
		return pod, nil, fmt.Errorf("%s.qos: %q is not Guaranteed, Burstable or BestEffort", f, pj.QOS)
	}

	st, err := statsOf(f, now, pj)
	return pod, st, err
}

func checkResources(f string, m map[string]Quantity) error {
	for _, name := range slices.Sorted(maps.Keys(m)) {
		switch name {
		case resMemory, resCPU, resEphemeralStorage:
		default:
			return fmt.Errorf("%s: unknown resource %q (want memory, cpu or ephemeral-storage)", f, name)
		}
	}
	return nil
}

// checkPodLevel rejects pod-level resources Kubernetes would: a resource
// other than memory and cpu (the snapshot's pod-level resources; Kubernetes
// also allows hugepages, which a snapshot does not describe), and a
// request above the limit of the same resource.
func checkPodLevel(f string, r ResourcesJSON) error {
	for _, part := range []struct {
		name string
		m    map[string]Quantity
	}{{"requests", r.Requests}, {"limits", r.Limits}} {
		for _, name := range slices.Sorted(maps.Keys(part.m)) {
			if name != resMemory && name != resCPU {
				return fmt.Errorf("%s.%s: %q is not a pod-level resource (want memory or cpu)", f, part.name, name)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.Requests)) {
		req := r.Requests[name].quantity()
		if l, ok := r.Limits[name]; ok {
			if lim := l.quantity(); req.Cmp(lim) > 0 {
				return fmt.Errorf("%s.requests.%s: %s is above limits.%s %s", f, name, req.String(), name, lim.String())
			}
		}
	}
	return nil
}

// bytesOf is q in bytes, fractions rounded up, clamped to [0, MaxInt64]
// (the API server's defaults may sum requests past it).
func bytesOf(q resource.Quantity) int64 {
	switch {
	case q.Sign() < 0:
		return 0
	case q.Cmp(*resource.NewQuantity(math.MaxInt64, resource.BinarySI)) > 0:
		return math.MaxInt64
	}
	return q.Value()
}

// apiPod is what of pj decides its QoS class and pod-level requests, as a
// Kubernetes pod as submitted: the containers' requests and limits and the
// pod-level resources, exactly as written. A snapshot has no init
// containers; pj.Requests are the effective requests ranking compares
// usage with, not the pod's spec.resources, and leave the class alone. The
// resource names must have been checked (checkResources, checkPodLevel).
func apiPod(pj PodJSON) *v1.Pod {
	pod := &v1.Pod{}
	if r := pj.Resources; r != nil {
		pod.Spec.Resources = &v1.ResourceRequirements{Requests: resourceList(r.Requests), Limits: resourceList(r.Limits)}
	}
	for _, c := range pj.Containers {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{
			Name:      c.Name,
			Resources: v1.ResourceRequirements{Requests: resourceList(c.Requests), Limits: resourceList(c.Limits)},
		})
	}
	return pod
}

func resourceList(m map[string]Quantity) v1.ResourceList {
	if len(m) == 0 {
		return nil
	}
	l := make(v1.ResourceList, len(m))
	for name, q := range m {
		l[v1.ResourceName(name)] = q.quantity()
	}
	return l
}

func statsOf(f string, now time.Time, pj PodJSON) (*signals.PodStats, error) {
	hasContainerUsage := false
	for _, c := range pj.Containers {
		if c.Usage != nil {
			hasContainerUsage = true
		}
	}
	if pj.Usage == nil && !hasContainerUsage {
		return nil, nil
	}
	st := &signals.PodStats{Time: now}
	var sum int64
	allMemory := len(pj.Containers) > 0
	for _, c := range pj.Containers {
		cs := signals.ContainerStats{Name: c.Name}
		if u := c.Usage; u != nil {
			if u.Memory != nil {
				cs.MemoryWorkingSet = signals.Int64(u.Memory.Value)
				sum = signals.AddSat(sum, u.Memory.Value)
			}
			cs.Rootfs = fsUsage(u.Rootfs)
			cs.Logs = fsUsage(u.Logs)
		}
		if cs.MemoryWorkingSet == nil {
			allMemory = false
		}
		st.Containers = append(st.Containers, cs)
	}
	if allMemory {
		st.MemoryWorkingSet = signals.Int64(sum)
	}
	if u := pj.Usage; u != nil {
		if u.Memory != nil {
			st.MemoryWorkingSet = signals.Int64(u.Memory.Value)
		}
		if u.Processes != nil {
			if *u.Processes < 0 {
				return nil, fmt.Errorf("%s.usage.processes: %d is negative", f, *u.Processes)
			}
			st.Processes = signals.Int64(*u.Processes)
		}
		if len(u.Volumes) > 0 {
			st.Volumes = make(map[string]signals.FsUsage, len(u.Volumes))
			for name, v := range u.Volumes {
				st.Volumes[name] = signals.FsUsage{Bytes: v.Bytes.Value, Inodes: v.Inodes.Value}
			}
		}
	}
	return st, nil
}

func fsUsage(u *FsUsageJSON) *signals.FsUsage {
	if u == nil {
		return nil
	}
	return &signals.FsUsage{Bytes: u.Bytes.Value, Inodes: u.Inodes.Value}
}

// maxSpared bounds a pod's spared reason.
const maxSpared = 256

// maxUID bounds a pod's uid: the API server's are 36 characters.
const maxUID = 128

// checkNames checks pod's names as the API server checks them: a
// namespace is a DNS-1123 label, a name a DNS-1123 subdomain, a local
// volume's name a DNS-1123 label; its uid is printable and short. A
// snapshot travels (copied from a node, written by hand), and what it
// names is printed and keyed on.
func checkNames(f string, pod signals.Pod) error {
	if msgs := validation.IsDNS1123Label(pod.Namespace); len(msgs) > 0 {
		return fmt.Errorf("%s.namespace %q: %s", f, pod.Namespace, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsDNS1123Subdomain(pod.Name); len(msgs) > 0 {
		return fmt.Errorf("%s.name %q: %s", f, pod.Name, strings.Join(msgs, "; "))
	}
	if len(pod.UID) > maxUID || strings.IndexFunc(pod.UID, func(r rune) bool { return !unicode.IsGraphic(r) || unicode.IsSpace(r) }) >= 0 {
		return fmt.Errorf("%s.uid %q: want at most %d printable characters without spaces", f, pod.UID, maxUID)
	}
	for i, v := range pod.LocalVolumes {
		if msgs := validation.IsDNS1123Label(v); len(msgs) > 0 {
			return fmt.Errorf("%s.localVolumes[%d] %q: %s", f, i, v, strings.Join(msgs, "; "))
		}
	}
	return nil
}
