package podsource

import (
	"fmt"
	"math"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/evictd/evictd/internal/qos"
	"github.com/evictd/evictd/signals"
)

// Annotations the kubelet sets on the pods it did not get from the API
// server (k8s.io/kubernetes/pkg/kubelet/types).
const (
	configSourceAnnotation = "kubernetes.io/config.source"
	configMirrorAnnotation = "kubernetes.io/config.mirror"
	apiserverSource        = "api"
)

// Convert describes pod as ranking sees it. It never fails: a value that
// cannot be represented (a request beyond int64 bytes) is clamped; use
// the Source's logs, or convert, to learn about it.
//
// The requests are what the kubelet's eviction manager compares usage with
// (k8s.io/kubernetes/pkg/api/v1/resource.GetResourceRequestQuantity, with
// the PodLevelResources feature on as it is by default since 1.34):
// component-helpers' PodRequests with SkipContainerLevelResources set when
// the pod has pod-level resources and ExcludeOverhead set, the pod overhead
// then added when the total is not zero. PodRequests takes the largest of
// the sum of the app containers and each init container plus the sidecars
// started before it, and adds the sidecars (restartable init containers)
// to the app containers. Pod-level resources cover only cpu, memory and
// hugepages, so a pod with them has no ephemeral-storage request for the
// kubelet, and none here. Such a pod's pod-level memory request is also
// kept as written (PodLevelMemoryRequest), for the eviction message.
func Convert(pod *v1.Pod) signals.Pod {
	p, _ := convert(pod, "")
	return p
}

// ConvertOn is Convert on a node whose Node object has UID nodeUID: a
// mirror pod's controller ownerReference must then name that UID too. ""
// (the node not yet seen) checks the name alone.
func ConvertOn(pod *v1.Pod, nodeUID types.UID) signals.Pod {
	p, _ := convert(pod, nodeUID)
	return p
}

// convert is Convert that also says what it had to clamp or guess, one
// note per oddity, for the Source to log.
func convert(pod *v1.Pod, nodeUID types.UID) (signals.Pod, []string) {
	var notes []string
	note := func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) }

	// Pods from the API server are defaulted already; pods from anywhere
	// else (tests, files) get the same defaults first.
	pod = qos.WithDefaults(pod)

	p := signals.Pod{
		Namespace: pod.Namespace,
		Name:      pod.Name,
		UID:       string(pod.UID),
		QOS:       qosClass(pod, note),
		// A static pod reaches the API server only as its mirror: no pod
		// read from it is static by its own say.
		Mirror:    isMirror(pod, nodeUID),
		DaemonSet: ownedByDaemonSet(pod),
		// "" is Always, the API server's default.
		RestartAlways: pod.Spec.RestartPolicy == v1.RestartPolicyAlways || pod.Spec.RestartPolicy == "",
	}
	if pod.Spec.Priority != nil {
		p.Priority = *pod.Spec.Priority
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		p.TerminationGracePeriodSeconds = new(int64)
		*p.TerminationGracePeriodSeconds = *g
	}

	reqs := podRequests(pod)
	memory := requestQuantity(pod, reqs, v1.ResourceMemory)
	storage := requestQuantity(pod, reqs, v1.ResourceEphemeralStorage)
	p.MemoryRequest = clampBytes(memory, note, "pod memory request")
	p.EphemeralStorageRequest = clampBytes(storage, note, "pod ephemeral-storage request")
	p.PodLevelMemoryRequest = podLevelMemoryRequest(pod, note)

	// The containers the kubelet's eviction message looks at: the app
	// containers, then every init container (sidecar or not); ephemeral
	// containers cannot have requests.
	// Only the app containers carry their ephemeral-storage limit: the
	// kubelet's local-storage eviction checks spec.containers alone. Each
	// carries the runtime's ID of its current instance once the kubelet
	// has reported it in the pod's status.
	statuses := [][]v1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses}
	for k, cs := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range cs {
			c := &cs[i]
			rc := signals.Container{
				Name:                    c.Name,
				MemoryRequest:           clampBytes(c.Resources.Requests[v1.ResourceMemory], note, "container %q memory request", c.Name),
				EphemeralStorageRequest: clampBytes(c.Resources.Requests[v1.ResourceEphemeralStorage], note, "container %q ephemeral-storage request", c.Name),
				ID:                      containerID(statuses[k], c.Name),
			}
			if k == 0 {
				rc.EphemeralStorageLimit = clampBytes(c.Resources.Limits[v1.ResourceEphemeralStorage], note, "container %q ephemeral-storage limit", c.Name)
			}
			p.Containers = append(p.Containers, rc)
		}
	}
	// The pod's limit is the kubelet's: PodLimits with no options (the
	// overhead added to a non-zero limit, pod-level limits used when set).
	if l, ok := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})[v1.ResourceEphemeralStorage]; ok {
		p.EphemeralStorageLimit = clampBytes(l, note, "pod ephemeral-storage limit")
	}
	p.LocalVolumes = localVolumeNames(pod, note)
	p.EmptyDirLimits = emptyDirLimits(pod, note)
	return p, notes
}

// maxContainerIDLength bounds a container ID taken from a pod's status;
// runtimes' IDs are 64 hexadecimal digits.
const maxContainerIDLength = 128

// containerID is the runtime's ID of the container named name as the
// kubelet reports it in statuses: its containerID ("containerd://<id>")
// without the runtime's prefix, while the status says it runs (a
// container created but not started, or ended, has no cgroup to read).
// It is empty when the status names no running container of that name,
// or an ID that is not letters, digits, '-', '_' and '.' alone (not
// starting with '.'), at most maxContainerIDLength long: a reader looks
// for a cgroup directory by it, and no status may make it look elsewhere.
func containerID(statuses []v1.ContainerStatus, name string) string {
	for i := range statuses {
		if statuses[i].Name != name {
			continue
		}
		if statuses[i].State.Running == nil {
			return ""
		}
		ref := statuses[i].ContainerID
		if _, id, ok := strings.Cut(ref, "://"); ok {
			ref = id
		}
		if !validContainerID(ref) {
			return ""
		}
		return ref
	}
	return ""
}

func validContainerID(id string) bool {
	if id == "" || len(id) > maxContainerIDLength || id[0] == '.' {
		return false
	}
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
		default:
			return false
		}
	}
	return true
}

// emptyDirLimits maps each emptyDir volume with a positive sizeLimit to
// that limit in bytes, whatever its medium: the kubelet checks the usage of
// memory-backed emptyDirs against their sizeLimit too. Nil when there are
// none.
func emptyDirLimits(pod *v1.Pod, note func(string, ...any)) map[string]int64 {
	var limits map[string]int64
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Sign() <= 0 {
			continue
		}
		if limits == nil {
			limits = map[string]int64{}
		}
		limits[v.Name] = clampBytes(*v.EmptyDir.SizeLimit, note, "emptyDir %q sizeLimit", v.Name)
	}
	return limits
}

// podRequests is the request list the kubelet's GetResourceRequestQuantity
// starts from, PodLevelResources on: container-level requests are skipped
// when the pod has pod-level resources, the overhead is left out.
func podRequests(pod *v1.Pod) v1.ResourceList {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{
		SkipContainerLevelResources: resourcehelper.IsPodLevelResourcesSet(pod),
		ExcludeOverhead:             true,
	})
}

// requestQuantity finishes GetResourceRequestQuantity for one resource:
// the request from reqs (podRequests) plus the pod overhead when the
// request is not zero.
func requestQuantity(pod *v1.Pod, reqs v1.ResourceList, name v1.ResourceName) resource.Quantity {
	q := resource.Quantity{Format: resource.BinarySI}
	if r, ok := reqs[name]; ok {
		q.Add(r)
	}
	if o, ok := pod.Spec.Overhead[name]; ok && !q.IsZero() {
		q.Add(o)
	}
	return q
}

// podLevelMemoryRequest is the pod-level memory request the kubelet's
// eviction message names: spec.resources.requests.memory, after the API
// server's defaults (a pod-level memory limit alone gives one), when the
// pod has pod-level resources (resourcehelper.IsPodLevelResourcesSet);
// nil otherwise. Its text is the Quantity's String(), which the kubelet
// prints ("1G" stays "1G").
func podLevelMemoryRequest(pod *v1.Pod, note func(string, ...any)) *signals.Request {
	if !resourcehelper.IsPodLevelResourcesSet(pod) {
		return nil
	}
	q, ok := pod.Spec.Resources.Requests[v1.ResourceMemory]
	if !ok {
		return nil
	}
	return &signals.Request{Bytes: clampBytes(q, note, "pod-level memory request"), Text: q.String()}
}

// maxBytes is the largest request ranking can hold.
var maxBytes = *resource.NewQuantity(math.MaxInt64, resource.BinarySI)

// clampBytes returns q in bytes (fractions rounded up, as Quantity.Value
// does), clamped to [0, MaxInt64]; it notes what it clamped, naming it with
// what and args (a format, used only then).
func clampBytes(q resource.Quantity, note func(string, ...any), what string, args ...any) int64 {
	switch {
	case q.Sign() < 0:
		note("%s %s is negative; using 0", fmt.Sprintf(what, args...), q.String())
		return 0
	case q.Cmp(maxBytes) > 0:
		note("%s %s is beyond %d bytes; clamped to that", fmt.Sprintf(what, args...), q.String(), int64(math.MaxInt64))
		return math.MaxInt64
	}
	return q.Value()
}

// isMirror reports the API server's copy of a static pod that the node
// itself created: the kubelet's mirror annotation and a controller
// ownerReference to the Node the pod is bound to, which is what
// NodeRestriction makes a kubelet set and what a kubelet's mirror pods
// carry. The annotations are written by whoever creates the pod, so
// either alone makes nothing critical: a tenant's pod with
// kubernetes.io/config.source: file or a config.mirror annotation is
// ranked and evicted like any other. The ownerReference must name the
// Node's UID as well when it is known (nodeUID not ""): a reference to a
// Node that went (or never was) is no proof, and the garbage collector
// deletes such a pod anyway.
func isMirror(pod *v1.Pod, nodeUID types.UID) bool {
	if _, ok := pod.Annotations[configMirrorAnnotation]; !ok || pod.Spec.NodeName == "" {
		return false
	}
	ref := metav1.GetControllerOf(pod)
	return ref != nil && ref.APIVersion == "v1" && ref.Kind == "Node" && ref.Name == pod.Spec.NodeName &&
		(nodeUID == "" || ref.UID == nodeUID)
}

// ownedByDaemonSet reports whether the pod's controller is an apps
// DaemonSet.
func ownedByDaemonSet(pod *v1.Pod) bool {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "DaemonSet" {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == "apps"
}

// localVolumeNames is the kubelet eviction manager's localVolumeNames: the
// volumes whose usage counts towards the pod's disk usage, hostPath plus
// volumeutil.IsLocalEphemeralVolume (gitRepo, configMap, emptyDir on the
// node's default medium). Secret, downwardAPI and projected volumes are not
// among them: the kubelet backs them with tmpfs, so they use memory, not
// disk; nor are emptyDirs with medium Memory or HugePages.
//
// A volume's name names a directory evictd walks: one that is not a DNS
// label, as the API server requires of it (so no "..", no "/"), is left
// out with a note, and never measured.
func localVolumeNames(pod *v1.Pod, note func(string, ...any)) []string {
	var names []string
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.HostPath != nil || v.GitRepo != nil || v.ConfigMap != nil ||
			(v.EmptyDir != nil && v.EmptyDir.Medium == v1.StorageMediumDefault) {
			if msgs := validation.IsDNS1123Label(v.Name); len(msgs) > 0 {
				note("volume %q not measured: its name is not a DNS label (%s)", v.Name, strings.Join(msgs, "; "))
				continue
			}
			names = append(names, v.Name)
		}
	}
	return names
}
