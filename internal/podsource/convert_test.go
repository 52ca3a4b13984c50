package podsource

import (
	"math"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/evictd/evictd/signals"
)

const mi = 1 << 20

// rl builds a ResourceList from name, quantity pairs.
func rl(pairs ...string) v1.ResourceList {
	l := v1.ResourceList{}
	for i := 0; i+1 < len(pairs); i += 2 {
		l[v1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return l
}

// ctr is a container with requests and limits.
func ctr(name string, req, lim v1.ResourceList) v1.Container {
	return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: req, Limits: lim}}
}

// sidecar is a restartable init container.
func sidecar(name string, req, lim v1.ResourceList) v1.Container {
	c := ctr(name, req, lim)
	always := v1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

// podOf is a pod in ns "ns" with the given spec.
func podOf(spec v1.PodSpec) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-1"}, Spec: spec}
}

func TestConvertQOS(t *testing.T) {
	guaranteed := rl("cpu", "500m", "memory", "128Mi")
	tests := []struct {
		name   string
		spec   v1.PodSpec
		status v1.PodQOSClass
		want   signals.QOSClass
		notes  int
	}{
		{name: "no resources", spec: v1.PodSpec{Containers: []v1.Container{ctr("a", nil, nil)}}, want: signals.BestEffort},
		{name: "only ephemeral-storage is not a QoS resource",
			spec: v1.PodSpec{Containers: []v1.Container{ctr("a", rl("ephemeral-storage", "1Gi"), rl("ephemeral-storage", "1Gi"))}}, want: signals.BestEffort},
		{name: "zero requests count as none",
			spec: v1.PodSpec{Containers: []v1.Container{ctr("a", rl("memory", "0"), nil)}}, want: signals.BestEffort},
		{name: "requests equal limits", spec: v1.PodSpec{Containers: []v1.Container{ctr("a", guaranteed, guaranteed), ctr("b", guaranteed, guaranteed)}}, want: signals.Guaranteed},
		{name: "limits only, requests default to them", spec: v1.PodSpec{Containers: []v1.Container{ctr("a", nil, guaranteed)}}, want: signals.Guaranteed},
		{name: "init container guaranteed too",
			spec: v1.PodSpec{Containers: []v1.Container{ctr("a", nil, guaranteed)}, InitContainers: []v1.Container{ctr("i", nil, rl("cpu", "1", "memory", "1Gi"))}}, want: signals.Guaranteed},
		{name: "init container without limits",
			spec: v1.PodSpec{Containers: []v1.Container{ctr("a", nil, guaranteed)}, InitContainers: []v1.Container{ctr("i", nil, nil)}}, want: signals.Burstable},
		{name: "requests below limits",
			spec: v1.PodSpec{Containers: []v1.Container{ctr("a", rl("cpu", "100m", "memory", "64Mi"), guaranteed)}}, want: signals.Burstable},
		{name: "memory limit without cpu limit",
			spec: v1.PodSpec{Containers: []v1.Container{ctr("a", nil, rl("memory", "128Mi"))}}, want: signals.Burstable},
		{name: "one container guaranteed, one best effort",
			spec: v1.PodSpec{Containers: []v1.Container{ctr("a", guaranteed, guaranteed), ctr("b", nil, nil)}}, want: signals.Burstable},
		{name: "requests only", spec: v1.PodSpec{Containers: []v1.Container{ctr("a", rl("memory", "1Mi"), nil)}}, want: signals.Burstable},
		{name: "pod-level limits only, requests default to them",
			spec: v1.PodSpec{Resources: &v1.ResourceRequirements{Limits: guaranteed}, Containers: []v1.Container{ctr("a", nil, nil)}}, want: signals.Guaranteed},
		{name: "pod-level limits, container requests become the pod's",
			spec: v1.PodSpec{Resources: &v1.ResourceRequirements{Limits: guaranteed}, Containers: []v1.Container{ctr("a", rl("memory", "64Mi"), nil)}}, want: signals.Burstable},
		{name: "pod-level requests only",
			spec: v1.PodSpec{Resources: &v1.ResourceRequirements{Requests: guaranteed}, Containers: []v1.Container{ctr("a", guaranteed, guaranteed)}}, want: signals.Burstable},
		{name: "status set by the API server wins",
			spec: v1.PodSpec{Containers: []v1.Container{ctr("a", nil, nil)}}, status: v1.PodQOSBurstable, want: signals.Burstable},
		{name: "unknown status is recomputed and noted",
			spec: v1.PodSpec{Containers: []v1.Container{ctr("a", nil, guaranteed)}}, status: "Platinum", want: signals.Guaranteed, notes: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := podOf(tt.spec)
			pod.Status.QOSClass = tt.status
			got, notes := convert(pod, "")
			if got.QOS != tt.want {
				t.Errorf("QOS = %s, want %s", got.QOS, tt.want)
			}
			if len(notes) != tt.notes {
				t.Errorf("notes = %q, want %d", notes, tt.notes)
			}
		})
	}
}

func TestConvertRequests(t *testing.T) {
	type cr = signals.Container
	tests := []struct {
		name           string
		spec           v1.PodSpec
		memory, disk   int64
		containers     []cr
		wantNoteSubstr string
	}{
		{name: "sum of app containers",
			spec:   v1.PodSpec{Containers: []v1.Container{ctr("a", rl("memory", "100Mi", "ephemeral-storage", "1Gi"), nil), ctr("b", rl("memory", "200Mi"), nil)}},
			memory: 300 * mi, disk: 1024 * mi,
			containers: []cr{{Name: "a", MemoryRequest: 100 * mi, EphemeralStorageRequest: 1024 * mi}, {Name: "b", MemoryRequest: 200 * mi}}},
		{name: "init container larger than app containers",
			spec: v1.PodSpec{
				InitContainers: []v1.Container{ctr("init", rl("memory", "500Mi", "ephemeral-storage", "2Gi"), nil)},
				Containers:     []v1.Container{ctr("a", rl("memory", "100Mi", "ephemeral-storage", "1Gi"), nil), ctr("b", rl("memory", "200Mi"), nil)}},
			memory: 500 * mi, disk: 2048 * mi,
			containers: []cr{{Name: "a", MemoryRequest: 100 * mi, EphemeralStorageRequest: 1024 * mi}, {Name: "b", MemoryRequest: 200 * mi}, {Name: "init", MemoryRequest: 500 * mi, EphemeralStorageRequest: 2048 * mi}}},
		{name: "init container smaller than app containers",
			spec:       v1.PodSpec{InitContainers: []v1.Container{ctr("init", rl("memory", "50Mi"), nil)}, Containers: []v1.Container{ctr("a", rl("memory", "100Mi"), nil)}},
			memory:     100 * mi,
			containers: []cr{{Name: "a", MemoryRequest: 100 * mi}, {Name: "init", MemoryRequest: 50 * mi}}},
		{name: "sidecar adds to app containers and to later init containers",
			spec: v1.PodSpec{
				InitContainers: []v1.Container{sidecar("proxy", rl("memory", "50Mi"), nil), ctr("migrate", rl("memory", "400Mi"), nil)},
				Containers:     []v1.Container{ctr("a", rl("memory", "100Mi"), nil)}},
			memory:     450 * mi, // max(100+50, 400+50)
			containers: []cr{{Name: "a", MemoryRequest: 100 * mi}, {Name: "proxy", MemoryRequest: 50 * mi}, {Name: "migrate", MemoryRequest: 400 * mi}}},
		{name: "sidecar after the init container",
			spec: v1.PodSpec{
				InitContainers: []v1.Container{ctr("migrate", rl("memory", "400Mi"), nil), sidecar("proxy", rl("memory", "50Mi"), nil)},
				Containers:     []v1.Container{ctr("a", rl("memory", "100Mi"), nil)}},
			memory:     400 * mi, // max(100+50, 400)
			containers: []cr{{Name: "a", MemoryRequest: 100 * mi}, {Name: "migrate", MemoryRequest: 400 * mi}, {Name: "proxy", MemoryRequest: 50 * mi}}},
		{name: "sidecars alone outgrow the init container",
			spec: v1.PodSpec{
				InitContainers: []v1.Container{sidecar("s1", rl("memory", "300Mi"), nil), sidecar("s2", rl("memory", "300Mi"), nil), ctr("i", rl("memory", "100Mi"), nil)},
				Containers:     []v1.Container{ctr("a", rl("memory", "100Mi"), nil)}},
			memory:     700 * mi, // 100 + 300 + 300 > 300 + 300 + 100
			containers: []cr{{Name: "a", MemoryRequest: 100 * mi}, {Name: "s1", MemoryRequest: 300 * mi}, {Name: "s2", MemoryRequest: 300 * mi}, {Name: "i", MemoryRequest: 100 * mi}}},
		{name: "limits stand for missing requests",
			spec:   v1.PodSpec{Containers: []v1.Container{ctr("a", nil, rl("memory", "256Mi", "ephemeral-storage", "1Gi"))}},
			memory: 256 * mi, disk: 1024 * mi,
			containers: []cr{{Name: "a", MemoryRequest: 256 * mi, EphemeralStorageRequest: 1024 * mi, EphemeralStorageLimit: 1024 * mi}}},
		{name: "pod overhead added",
			spec:   v1.PodSpec{Overhead: rl("memory", "64Mi", "ephemeral-storage", "10Mi"), Containers: []v1.Container{ctr("a", rl("memory", "100Mi", "ephemeral-storage", "1Gi"), nil)}},
			memory: 164 * mi, disk: 1034 * mi,
			containers: []cr{{Name: "a", MemoryRequest: 100 * mi, EphemeralStorageRequest: 1024 * mi}}},
		{name: "pod overhead not added to a zero request",
			spec:       v1.PodSpec{Overhead: rl("memory", "64Mi"), Containers: []v1.Container{ctr("a", nil, nil)}},
			containers: []cr{{Name: "a"}}},
		{name: "pod-level requests replace the containers'",
			spec: v1.PodSpec{Resources: &v1.ResourceRequirements{Requests: rl("memory", "1Gi")},
				Containers: []v1.Container{ctr("a", rl("memory", "100Mi", "ephemeral-storage", "1Gi"), nil)}},
			memory: 1024 * mi, disk: 0, // no pod-level ephemeral-storage: the kubelet then sees none
			containers: []cr{{Name: "a", MemoryRequest: 100 * mi, EphemeralStorageRequest: 1024 * mi}}},
		{name: "pod-level limits give the requests, plus overhead",
			spec: v1.PodSpec{Resources: &v1.ResourceRequirements{Limits: rl("cpu", "1", "memory", "512Mi")}, Overhead: rl("memory", "64Mi"),
				Containers: []v1.Container{ctr("a", nil, nil)}},
			memory:     576 * mi,
			containers: []cr{{Name: "a"}}},
		{name: "pod-level cpu only leaves no memory request",
			spec:       v1.PodSpec{Resources: &v1.ResourceRequirements{Requests: rl("cpu", "1")}, Containers: []v1.Container{ctr("a", rl("memory", "100Mi"), nil)}},
			containers: []cr{{Name: "a", MemoryRequest: 100 * mi}}},
		{name: "fractional bytes round up",
			spec:       v1.PodSpec{Containers: []v1.Container{ctr("a", rl("memory", "1500m"), nil)}},
			memory:     2,
			containers: []cr{{Name: "a", MemoryRequest: 2}}},
		{name: "request beyond int64 is clamped",
			spec:           v1.PodSpec{Containers: []v1.Container{ctr("a", rl("memory", "1e30"), nil)}},
			memory:         math.MaxInt64,
			containers:     []cr{{Name: "a", MemoryRequest: math.MaxInt64}},
			wantNoteSubstr: `container "a" memory request 1e30 is beyond`},
		{name: "a tenant's absurd exponent is bounded, then clamped (comparing 1e3000000 itself takes half a second)",
			spec:           v1.PodSpec{Containers: []v1.Container{ctr("a", rl("memory", "1e3000000"), nil)}},
			memory:         math.MaxInt64,
			containers:     []cr{{Name: "a", MemoryRequest: math.MaxInt64}},
			wantNoteSubstr: `container "a" memory request 10e99 is beyond`},
		{name: "sum beyond int64 is clamped",
			spec:           v1.PodSpec{Containers: []v1.Container{ctr("a", rl("ephemeral-storage", "4Ei"), nil), ctr("b", rl("ephemeral-storage", "4Ei"), nil)}},
			disk:           math.MaxInt64,
			containers:     []cr{{Name: "a", EphemeralStorageRequest: 1 << 62}, {Name: "b", EphemeralStorageRequest: 1 << 62}},
			wantNoteSubstr: "pod ephemeral-storage request 8Ei is beyond"},
		{name: "negative request is zero",
			spec:           v1.PodSpec{Containers: []v1.Container{ctr("a", rl("memory", "-1Mi"), nil)}},
			containers:     []cr{{Name: "a"}},
			wantNoteSubstr: `container "a" memory request -1Mi is negative`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := podOf(tt.spec)
			before := pod.DeepCopy()
			got, notes := convert(pod, "")
			if got.MemoryRequest != tt.memory {
				t.Errorf("MemoryRequest = %d, want %d", got.MemoryRequest, tt.memory)
			}
			if got.EphemeralStorageRequest != tt.disk {
				t.Errorf("EphemeralStorageRequest = %d, want %d", got.EphemeralStorageRequest, tt.disk)
			}
			if !reflect.DeepEqual(got.Containers, tt.containers) {
				t.Errorf("Containers = %+v, want %+v", got.Containers, tt.containers)
			}
			joined := strings.Join(notes, "; ")
			if tt.wantNoteSubstr == "" && len(notes) > 0 || !strings.Contains(joined, tt.wantNoteSubstr) {
				t.Errorf("notes = %q, want one containing %q", joined, tt.wantNoteSubstr)
			}
			if !reflect.DeepEqual(pod, before) {
				t.Errorf("Convert changed its argument")
			}
		})
	}
}

func TestConvertIdentity(t *testing.T) {
	prio := func(p int32) *int32 { return &p }
	owner := func(apiVersion, kind string, controller bool) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "o", UID: "o-uid", Controller: &controller}}
	}
	// What the kubelet puts on the mirror pods it creates.
	nodeOwner := func(apiVersion, node string, controller bool) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: "Node", Name: node, UID: "node-uid", Controller: &controller}}
	}
	mirrorAnn := map[string]string{configMirrorAnnotation: "hash", configSourceAnnotation: "file"}
	tests := []struct {
		name        string
		annotations map[string]string
		owners      []metav1.OwnerReference
		priority    *int32
		nodeUID     types.UID // the Node's UID as evictd's watch shows it; "" unknown
		want        func(p signals.Pod) bool
	}{
		{name: "plain pod", want: func(p signals.Pod) bool {
			return !p.Static && !p.Mirror && !p.DaemonSet && p.Priority == 0 && !p.Critical()
		}},
		{name: "config.source file alone is not static", annotations: map[string]string{configSourceAnnotation: "file"},
			want: func(p signals.Pod) bool { return !p.Static && !p.Mirror && !p.Critical() }},
		{name: "config.source api is not static", annotations: map[string]string{configSourceAnnotation: "api"},
			want: func(p signals.Pod) bool { return !p.Static && !p.Critical() }},
		{name: "mirror annotation without a Node owner is not a mirror", annotations: mirrorAnn,
			want: func(p signals.Pod) bool { return !p.Static && !p.Mirror && !p.Critical() }},
		{name: "mirror created by its node", annotations: mirrorAnn, owners: nodeOwner("v1", "node-a", true),
			want: func(p signals.Pod) bool { return p.Mirror && !p.Static && p.Critical() }},
		{name: "mirror annotation empty, created by its node", annotations: map[string]string{configMirrorAnnotation: ""}, owners: nodeOwner("v1", "node-a", true),
			want: func(p signals.Pod) bool { return p.Mirror }},
		{name: "mirror owned by another node", annotations: mirrorAnn, owners: nodeOwner("v1", "node-b", true),
			want: func(p signals.Pod) bool { return !p.Mirror && !p.Critical() }},
		{name: "mirror whose Node owner is not its controller", annotations: mirrorAnn, owners: nodeOwner("v1", "node-a", false),
			want: func(p signals.Pod) bool { return !p.Mirror && !p.Critical() }},
		{name: "mirror owned by a Node of another group", annotations: mirrorAnn, owners: nodeOwner("example.com/v1", "node-a", true),
			want: func(p signals.Pod) bool { return !p.Mirror && !p.Critical() }},
		{name: "Node owner without the mirror annotation", owners: nodeOwner("v1", "node-a", true),
			want: func(p signals.Pod) bool { return !p.Mirror && !p.Critical() }},
		{name: "mirror naming its Node's UID", annotations: mirrorAnn, owners: nodeOwner("v1", "node-a", true), nodeUID: "node-uid",
			want: func(p signals.Pod) bool { return p.Mirror && p.Critical() }},
		{name: "mirror naming another UID than its Node's", annotations: mirrorAnn, owners: nodeOwner("v1", "node-a", true), nodeUID: "node-a-registered-again",
			want: func(p signals.Pod) bool { return !p.Mirror && !p.Critical() }},
		{name: "system-cluster-critical", priority: prio(2000000000), want: func(p signals.Pod) bool { return p.Priority == 2000000000 && p.Critical() }},
		{name: "just below critical", priority: prio(1999999999), want: func(p signals.Pod) bool { return !p.Critical() }},
		{name: "negative priority", priority: prio(-5), want: func(p signals.Pod) bool { return p.Priority == -5 }},
		{name: "DaemonSet controller", owners: owner("apps/v1", "DaemonSet", true), want: func(p signals.Pod) bool { return p.DaemonSet }},
		{name: "ReplicaSet controller", owners: owner("apps/v1", "ReplicaSet", true), want: func(p signals.Pod) bool { return !p.DaemonSet }},
		{name: "DaemonSet owner that is not the controller", owners: owner("apps/v1", "DaemonSet", false), want: func(p signals.Pod) bool { return !p.DaemonSet }},
		{name: "DaemonSet of another group", owners: owner("example.com/v1", "DaemonSet", true), want: func(p signals.Pod) bool { return !p.DaemonSet }},
		{name: "malformed apiVersion", owners: owner("a/b/c", "DaemonSet", true), want: func(p signals.Pod) bool { return !p.DaemonSet }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := podOf(v1.PodSpec{NodeName: "node-a", Containers: []v1.Container{ctr("a", nil, nil)}, Priority: tt.priority})
			pod.Annotations, pod.OwnerReferences = tt.annotations, tt.owners
			if got := ConvertOn(pod, tt.nodeUID); !tt.want(got) {
				t.Errorf("ConvertOn(pod, %q) = %+v", tt.nodeUID, got)
			}
		})
	}
}

func TestConvertLocalVolumes(t *testing.T) {
	vol := func(name string, src v1.VolumeSource) v1.Volume { return v1.Volume{Name: name, VolumeSource: src} }
	spec := v1.PodSpec{
		Containers: []v1.Container{ctr("a", nil, nil)},
		Volumes: []v1.Volume{
			vol("disk-emptydir", v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}),
			vol("memory-emptydir", v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}),
			vol("hugepages-emptydir", v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumHugePages}}),
			vol("configmap", v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}),
			vol("secret", v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}}),
			vol("downwardapi", v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{}}),
			vol("projected", v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{}}),
			vol("gitrepo", v1.VolumeSource{GitRepo: &v1.GitRepoVolumeSource{Repository: "r"}}),
			vol("hostpath", v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/var/log"}}),
			vol("pvc", v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}),
			vol("generic-ephemeral", v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}),
			vol("csi", v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "d"}}),
			vol("image", v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "r"}}),
			vol("empty-source", v1.VolumeSource{}),
			// Names no API server accepts, as a broken one could send:
			// they would name directories outside the pod's.
			vol("..", v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}),
			vol("../../../etc", v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}),
			vol("", v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}),
		},
	}
	got := Convert(podOf(spec)).LocalVolumes
	// Secret, downwardAPI and projected volumes are tmpfs on the node: the
	// kubelet does not count them as disk (localVolumeNames).
	want := []string{"disk-emptydir", "configmap", "gitrepo", "hostpath"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("LocalVolumes = %q, want %q", got, want)
	}
	if got := Convert(podOf(v1.PodSpec{})).LocalVolumes; got != nil {
		t.Errorf("LocalVolumes of a pod without volumes = %q, want nil", got)
	}
}

// TestConvertWhole checks every field on one pod, and that the result
// shares no memory with the pod.
func TestConvertWhole(t *testing.T) {
	grace, prio := int64(30), int32(1000)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1", UID: "u-42", Labels: map[string]string{"app": "web"}},
		Spec: v1.PodSpec{
			Priority:                      &prio,
			TerminationGracePeriodSeconds: &grace,
			InitContainers:                []v1.Container{sidecar("envoy", rl("memory", "64Mi"), rl("memory", "128Mi"))},
			Containers:                    []v1.Container{ctr("app", rl("cpu", "1", "memory", "256Mi", "ephemeral-storage", "1Gi"), nil)},
			Volumes:                       []v1.Volume{{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
		},
		Status: v1.PodStatus{QOSClass: v1.PodQOSBurstable, Phase: v1.PodRunning},
	}
	want := signals.Pod{
		Namespace: "shop", Name: "web-1", UID: "u-42", QOS: signals.Burstable, Priority: 1000,
		MemoryRequest: 320 * mi, EphemeralStorageRequest: 1024 * mi,
		Containers: []signals.Container{
			{Name: "app", MemoryRequest: 256 * mi, EphemeralStorageRequest: 1024 * mi},
			{Name: "envoy", MemoryRequest: 64 * mi},
		},
		LocalVolumes:                  []string{"cache"},
		TerminationGracePeriodSeconds: &grace,
		RestartAlways:                 true,
	}
	got := Convert(pod)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Convert =\n%+v\nwant\n%+v", got, want)
	}
	if got.TerminationGracePeriodSeconds == pod.Spec.TerminationGracePeriodSeconds {
		t.Errorf("TerminationGracePeriodSeconds points into the pod")
	}
}

// TestConvertPodLevelResources: a pod with pod-level resources (KEP-2837)
// keeps its pod-level memory request for the eviction message, as the
// kubelet's evictionMessage reads it (spec.resources.requests.memory after
// the API server's defaults, printed as the Quantity prints), while its
// containers keep their own requests, 0 when they set none.
func TestConvertPodLevelResources(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spec   v1.PodSpec
		want   *signals.Request
		memory int64
	}{
		{name: "the kubelet's case: pod-level request and limit, containers without",
			spec: v1.PodSpec{Resources: &v1.ResourceRequirements{Requests: rl("memory", "250Mi"), Limits: rl("memory", "1000Mi")},
				Containers: []v1.Container{ctr("regular1", nil, nil), ctr("regular2", nil, nil)}},
			want: &signals.Request{Bytes: 250 * mi, Text: "250Mi"}, memory: 250 * mi},
		{name: "a decimal request keeps its form",
			spec: v1.PodSpec{Resources: &v1.ResourceRequirements{Requests: rl("memory", "1G")},
				Containers: []v1.Container{ctr("app", nil, nil)}},
			want: &signals.Request{Bytes: 1000000000, Text: "1G"}, memory: 1000000000},
		{name: "printed canonical, as the kubelet's Quantity prints",
			spec: v1.PodSpec{Resources: &v1.ResourceRequirements{Requests: rl("memory", "0.5Gi")},
				Containers: []v1.Container{ctr("app", nil, nil)}},
			want: &signals.Request{Bytes: 512 * mi, Text: "512Mi"}, memory: 512 * mi},
		{name: "a pod-level limit alone defaults the request to the containers' sum",
			spec: v1.PodSpec{Resources: &v1.ResourceRequirements{Limits: rl("memory", "1Gi")},
				Containers: []v1.Container{ctr("app", rl("memory", "100Mi"), nil), ctr("sidecar", rl("memory", "28Mi"), nil)}},
			want: &signals.Request{Bytes: 128 * mi, Text: "128Mi"}, memory: 128 * mi},
		{name: "a pod-level limit alone, containers without requests: the limit",
			spec: v1.PodSpec{Resources: &v1.ResourceRequirements{Limits: rl("memory", "1Gi")},
				Containers: []v1.Container{ctr("app", nil, nil)}},
			want: &signals.Request{Bytes: 1024 * mi, Text: "1Gi"}, memory: 1024 * mi},
		{name: "pod-level cpu only: no pod-level memory request",
			spec: v1.PodSpec{Resources: &v1.ResourceRequirements{Requests: rl("cpu", "1")},
				Containers: []v1.Container{ctr("app", rl("memory", "100Mi"), nil)}}},
		{name: "no pod-level resources",
			spec:   v1.PodSpec{Containers: []v1.Container{ctr("app", rl("memory", "100Mi"), nil)}},
			memory: 100 * mi},
		{name: "empty pod-level resources",
			spec:   v1.PodSpec{Resources: &v1.ResourceRequirements{}, Containers: []v1.Container{ctr("app", rl("memory", "100Mi"), nil)}},
			memory: 100 * mi},
		{name: "pod-level ephemeral-storage is no pod-level resource",
			spec: v1.PodSpec{Resources: &v1.ResourceRequirements{Requests: rl("ephemeral-storage", "1Gi", "memory", "64Mi")},
				Containers: []v1.Container{ctr("app", rl("memory", "100Mi"), nil)}},
			want: &signals.Request{Bytes: 64 * mi, Text: "64Mi"}, memory: 64 * mi},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Convert(podOf(tc.spec))
			if !reflect.DeepEqual(got.PodLevelMemoryRequest, tc.want) {
				t.Errorf("PodLevelMemoryRequest = %+v, want %+v", got.PodLevelMemoryRequest, tc.want)
			}
			if got.MemoryRequest != tc.memory {
				t.Errorf("MemoryRequest = %d, want %d", got.MemoryRequest, tc.memory)
			}
		})
	}

	// The whole pod of the kubelet's case, its containers with their own
	// requests (none).
	pod := podOf(v1.PodSpec{
		Resources:  &v1.ResourceRequirements{Requests: rl("memory", "250Mi"), Limits: rl("memory", "1000Mi")},
		Containers: []v1.Container{ctr("regular1", nil, nil), ctr("regular2", nil, nil)},
	})
	want := signals.Pod{Namespace: "ns", Name: "p", UID: "uid-1", QOS: signals.Burstable,
		MemoryRequest:         250 * mi,
		PodLevelMemoryRequest: &signals.Request{Bytes: 250 * mi, Text: "250Mi"},
		Containers:            []signals.Container{{Name: "regular1"}, {Name: "regular2"}},
		RestartAlways:         true,
	}
	if got := Convert(pod); !reflect.DeepEqual(got, want) {
		t.Errorf("Convert =\n%+v\nwant\n%+v", got, want)
	}
}

// BenchmarkConvert converts a pod with an init container, a sidecar, two
// app containers and volumes, as Pods does for each pod on every pass.
func BenchmarkConvert(b *testing.B) {
	pod := podOf(v1.PodSpec{
		InitContainers: []v1.Container{sidecar("proxy", rl("cpu", "100m", "memory", "64Mi"), nil), ctr("init", rl("memory", "256Mi"), nil)},
		Containers:     []v1.Container{ctr("app", rl("cpu", "1", "memory", "512Mi", "ephemeral-storage", "1Gi"), nil), ctr("log", rl("memory", "32Mi"), nil)},
		Volumes:        []v1.Volume{{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
	})
	pod.Status.QOSClass = v1.PodQOSBurstable
	b.ReportAllocs()
	for b.Loop() {
		Convert(pod)
	}
}

func TestConvertLocalStorageLimits(t *testing.T) {
	gi := int64(1024 * mi)
	size := func(q string) *resource.Quantity { v := resource.MustParse(q); return &v }
	emptyDir := func(name string, medium v1.StorageMedium, limit *resource.Quantity) v1.Volume {
		return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: medium, SizeLimit: limit}}}
	}
	tests := []struct {
		name           string
		spec           v1.PodSpec
		pod            int64
		containers     map[string]int64
		emptyDirs      map[string]int64
		wantNoteSubstr string
	}{
		{name: "no limits",
			spec:       v1.PodSpec{Containers: []v1.Container{ctr("a", nil, nil)}},
			containers: map[string]int64{"a": 0}},
		{name: "containers' limits summed",
			spec:       v1.PodSpec{Containers: []v1.Container{ctr("a", nil, rl("ephemeral-storage", "1Gi")), ctr("b", nil, rl("ephemeral-storage", "512Mi"))}},
			pod:        gi + 512*mi,
			containers: map[string]int64{"a": gi, "b": 512 * mi}},
		{name: "a container without a limit still gives the pod one",
			spec:       v1.PodSpec{Containers: []v1.Container{ctr("a", nil, rl("ephemeral-storage", "1Gi")), ctr("b", nil, nil)}},
			pod:        gi,
			containers: map[string]int64{"a": gi, "b": 0}},
		{name: "larger init container sets the pod limit but carries none itself",
			spec: v1.PodSpec{Containers: []v1.Container{ctr("a", nil, rl("ephemeral-storage", "1Gi"))},
				InitContainers: []v1.Container{ctr("init", nil, rl("ephemeral-storage", "2Gi"))}},
			pod:        2 * gi,
			containers: map[string]int64{"a": gi, "init": 0}},
		{name: "overhead added to a non-zero limit",
			spec: v1.PodSpec{Overhead: rl("ephemeral-storage", "10Mi"),
				Containers: []v1.Container{ctr("a", nil, rl("ephemeral-storage", "1Gi"))}},
			pod:        gi + 10*mi,
			containers: map[string]int64{"a": gi}},
		{name: "emptyDir sizeLimits, any medium, positive only",
			spec: v1.PodSpec{Containers: []v1.Container{ctr("a", nil, nil)}, Volumes: []v1.Volume{
				emptyDir("cache", v1.StorageMediumDefault, size("100Mi")),
				emptyDir("shm", v1.StorageMediumMemory, size("64Mi")),
				emptyDir("unbounded", v1.StorageMediumDefault, nil),
				emptyDir("zero", v1.StorageMediumDefault, size("0")),
				{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}},
			}},
			containers: map[string]int64{"a": 0},
			emptyDirs:  map[string]int64{"cache": 100 * mi, "shm": 64 * mi}},
		{name: "limit beyond int64 is clamped",
			spec:           v1.PodSpec{Containers: []v1.Container{ctr("a", nil, rl("ephemeral-storage", "1e30"))}},
			pod:            math.MaxInt64,
			containers:     map[string]int64{"a": math.MaxInt64},
			wantNoteSubstr: `container "a" ephemeral-storage limit 1e30 is beyond`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, notes := convert(podOf(tt.spec), "")
			if got.EphemeralStorageLimit != tt.pod {
				t.Errorf("EphemeralStorageLimit = %d, want %d", got.EphemeralStorageLimit, tt.pod)
			}
			limits := map[string]int64{}
			for _, c := range got.Containers {
				limits[c.Name] = c.EphemeralStorageLimit
			}
			if !reflect.DeepEqual(limits, tt.containers) {
				t.Errorf("container limits = %v, want %v", limits, tt.containers)
			}
			if !reflect.DeepEqual(got.EmptyDirLimits, tt.emptyDirs) {
				t.Errorf("EmptyDirLimits = %v, want %v", got.EmptyDirLimits, tt.emptyDirs)
			}
			joined := strings.Join(notes, "; ")
			if tt.wantNoteSubstr == "" && len(notes) > 0 || !strings.Contains(joined, tt.wantNoteSubstr) {
				t.Errorf("notes = %q, want one containing %q", joined, tt.wantNoteSubstr)
			}
		})
	}
}

// TestConvertContainerIDs: each container, app or init, carries the ID of
// its current instance from the kubelet's status of that name, without the
// runtime's prefix, while it runs; none before the kubelet reports one,
// none once it has ended or before it starts (no cgroup to read), and none
// for an ID that could name anything but one cgroup directory.
func TestConvertContainerIDs(t *testing.T) {
	const id = "3f1c0de2a9b04c9e8d7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d"
	st := func(name, ref string) v1.ContainerStatus {
		return v1.ContainerStatus{Name: name, ContainerID: ref, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
	}
	ended := func(name, ref string) v1.ContainerStatus {
		return v1.ContainerStatus{Name: name, ContainerID: ref, State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: "Completed"}}}
	}
	created := func(name, ref string) v1.ContainerStatus {
		return v1.ContainerStatus{Name: name, ContainerID: ref, State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	}
	spec := v1.PodSpec{
		InitContainers: []v1.Container{sidecar("proxy", nil, nil), ctr("migrate", nil, nil)},
		Containers:     []v1.Container{ctr("app", nil, nil), ctr("log", nil, nil)},
	}
	tests := []struct {
		name       string
		app, inits []v1.ContainerStatus
		want       map[string]string // by container name; absent: ""
	}{
		{name: "no status yet"},
		{name: "containerd, the prefix dropped",
			app:  []v1.ContainerStatus{st("app", "containerd://"+id)},
			want: map[string]string{"app": id}},
		{name: "every runtime's prefix",
			app:  []v1.ContainerStatus{st("app", "cri-o://"+id), st("log", "docker://abc123")},
			want: map[string]string{"app": id, "log": "abc123"}},
		{name: "init containers from their own statuses",
			app:   []v1.ContainerStatus{st("app", "containerd://a1")},
			inits: []v1.ContainerStatus{st("proxy", "containerd://p1"), st("migrate", "containerd://m1")},
			want:  map[string]string{"app": "a1", "proxy": "p1", "migrate": "m1"}},
		{name: "an app status does not name an init container of the same name",
			app:  []v1.ContainerStatus{st("proxy", "containerd://x1")},
			want: map[string]string{}},
		{name: "a status of no spec container names nothing",
			app:  []v1.ContainerStatus{st("ghost", "containerd://g1")},
			want: map[string]string{}},
		{name: "running, no ID yet", app: []v1.ContainerStatus{st("app", "")}, want: map[string]string{}},
		{name: "an init container that has completed: none",
			app:   []v1.ContainerStatus{st("app", "containerd://a1")},
			inits: []v1.ContainerStatus{st("proxy", "containerd://p1"), ended("migrate", "containerd://m1")},
			want:  map[string]string{"app": "a1", "proxy": "p1"}},
		{name: "created, not started: none", app: []v1.ContainerStatus{created("app", "containerd://a1")}, want: map[string]string{}},
		{name: "ended, restarting: none", app: []v1.ContainerStatus{ended("app", "containerd://a1"), st("log", "containerd://l1")},
			want: map[string]string{"log": "l1"}},
		{name: "IDs that could leave the pod's cgroup are none",
			app:   []v1.ContainerStatus{st("app", "containerd://../../pod-other"), st("log", "containerd://a/b")},
			inits: []v1.ContainerStatus{st("proxy", "containerd://.."), st("migrate", "containerd://"+strings.Repeat("a", 129))},
			want:  map[string]string{}},
		{name: "the longest ID kept", app: []v1.ContainerStatus{st("app", "containerd://"+strings.Repeat("a", 128))},
			want: map[string]string{"app": strings.Repeat("a", 128)}},
		{name: "no prefix, as given", app: []v1.ContainerStatus{st("app", id)}, want: map[string]string{"app": id}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := podOf(spec)
			pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses = tt.app, tt.inits
			got := containerIDs(Convert(pod))
			want := tt.want
			if want == nil {
				want = map[string]string{}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("IDs %v, want %v", got, want)
			}
		})
	}
}

// containerIDs maps p's containers that have an ID to it.
func containerIDs(p signals.Pod) map[string]string {
	ids := map[string]string{}
	for _, c := range p.Containers {
		if c.ID != "" {
			ids[c.Name] = c.ID
		}
	}
	return ids
}

// TestConvertRestartAlways: only a pod whose restartPolicy is Always, or
// unset (the API server's default), restarts whatever its exit.
func TestConvertRestartAlways(t *testing.T) {
	for policy, want := range map[v1.RestartPolicy]bool{
		"":                         true,
		v1.RestartPolicyAlways:     true,
		v1.RestartPolicyOnFailure:  false,
		v1.RestartPolicyNever:      false,
		v1.RestartPolicy("Sudden"): false,
	} {
		pod := podOf(v1.PodSpec{RestartPolicy: policy, Containers: []v1.Container{ctr("app", nil, nil)}})
		if got := Convert(pod).RestartAlways; got != want {
			t.Errorf("restartPolicy %q: RestartAlways %v, want %v", policy, got, want)
		}
	}
}
