package signals

// QOSClass is a pod's Kubernetes quality-of-service class.
type QOSClass string

// The three QoS classes.
const (
	Guaranteed QOSClass = "Guaranteed"
	Burstable  QOSClass = "Burstable"
	BestEffort QOSClass = "BestEffort"
)

// SystemCriticalPriority is the lowest priority of a critical pod
// (system-cluster-critical); such pods are never evicted.
const SystemCriticalPriority = 2000000000

// Container is what ranking and the eviction message need of one container.
type Container struct {
	Name string
	// MemoryRequest and EphemeralStorageRequest are in bytes (0 = none).
	MemoryRequest           int64
	EphemeralStorageRequest int64
	// EphemeralStorageLimit is the container's ephemeral-storage limit in
	// bytes (0 = none). Only app containers carry one: the kubelet checks
	// the limits of spec.containers alone, not of init containers.
	EphemeralStorageLimit int64
	// ID is the container runtime's ID of the container's running
	// instance, as the kubelet reports it in the pod's status (its
	// containerID without the "<runtime>://" prefix); empty until the
	// kubelet has reported it running, and once it has ended. Pod stats
	// readers find the container's own cgroup by it, below the pod's; it
	// names nothing else and decides nothing.
	ID string
}

// Request is one request of a pod spec: Bytes in bytes (fractions rounded
// up), and Text as the kubelet prints the request in its messages (the
// resource.Quantity's String(): "250Mi", "1G"), which Bytes alone cannot
// always give back (1G is 1000000000 bytes, printed "1000000000").
type Request struct {
	Bytes int64
	Text  string
}

// Pod is what ranking needs to know about a pod. Whoever builds it (the API
// server informer, the cgroup discovery of standalone mode, a snapshot) fills
// the requests as the kubelet computes them (init containers, overhead,
// pod-level resources).
type Pod struct {
	Namespace string
	Name      string
	UID       string
	QOS       QOSClass
	// Priority is spec.priority (0 when unset).
	Priority int32
	// Static is a pod known, from a source the node trusts (a snapshot's
	// operator), to come from a file or URL; no pod read from the API
	// server is static by its own annotations. Mirror is the API server's
	// copy of a static pod that the node itself created: the mirror
	// annotation and a controller ownerReference to this Node.
	Static bool
	Mirror bool
	// Spared, when not empty, says why a pod source that cannot tell the
	// pod's priority or requests keeps it from being evicted (standalone
	// mode, with no API server): the pod counts as critical.
	Spared string
	// DaemonSet is true when the pod's controller is a DaemonSet.
	DaemonSet bool
	// MemoryRequest and EphemeralStorageRequest are the pod's effective
	// requests in bytes.
	MemoryRequest           int64
	EphemeralStorageRequest int64
	// EphemeralStorageLimit is the pod's ephemeral-storage limit in bytes
	// as the kubelet's PodLimits computes it (the containers' limits
	// summed, or the largest init container's); 0 = none.
	EphemeralStorageLimit int64
	// PodLevelMemoryRequest is the pod-level memory request
	// (spec.resources.requests.memory, KEP-2837), as the API server
	// defaults it; nil when the pod has none. The eviction message for
	// memory then states the pod's working set against it, as the
	// kubelet's does. MemoryRequest above is already this request (plus
	// the overhead) for such a pod.
	PodLevelMemoryRequest *Request
	Containers            []Container
	// EmptyDirLimits holds the sizeLimit in bytes of each emptyDir volume
	// that sets a positive one, by volume name (nil when none does).
	EmptyDirLimits map[string]int64
	// LocalVolumes names the pod's volumes that count towards its node
	// disk usage, as the kubelet counts them: emptyDir on the default
	// medium, configMap, gitRepo and hostPath. Secret, downwardAPI and
	// projected volumes live in memory (tmpfs) and are not disk.
	LocalVolumes []string
	// TerminationGracePeriodSeconds is the pod's own grace period, nil when
	// unset.
	TerminationGracePeriodSeconds *int64
	// RestartAlways is true when the pod's spec.restartPolicy is Always
	// (the API server's default): the kubelet restarts a container that
	// exits, so no exit can make the pod Succeeded before the kubelet
	// has it evicted. False when the source cannot tell (standalone
	// mode, a snapshot) and for Never and OnFailure. It decides how an
	// evicted pod is first signalled, never whether it is evicted.
	RestartAlways bool
}

// Critical reports whether the pod must never be evicted: static and mirror
// pods, pods at or above system-cluster-critical priority, and pods their
// source spares.
func (p *Pod) Critical() bool {
	return p.Static || p.Mirror || p.Priority >= SystemCriticalPriority || p.Spared != ""
}

// Ref is namespace/name, for logs and messages.
func (p *Pod) Ref() string { return p.Namespace + "/" + p.Name }
