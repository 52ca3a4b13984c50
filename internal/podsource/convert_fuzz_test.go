package podsource

import (
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/evictd/evictd/internal/qos"
	"github.com/evictd/evictd/signals"
)

// The seeds of FuzzConvert, in the language of fuzzPod.
var convertSeeds = []struct{ spec, nodeUID string }{
	// A Burstable pod with a sidecar, an init container, pod-level
	// resources, an overhead and volumes of every kind, as a tenant
	// writes it behind a ReplicaSet.
	{`ns shop
name web-7d9f-abcde
uid 0b6e2a51-web
node node-a
prio 1000
grace 45
label app=web
ann kubectl.kubernetes.io/last-applied-configuration={"kind":"Pod"}
owner apps/v1 ReplicaSet web-7d9f rs-uid true
pod cpu=2,memory=1Gi,hugepages-2Mi=64Mi cpu=4,memory=2Gi
overhead memory=64Mi,cpu=250m
i envoy Always memory=64Mi,cpu=100m,ephemeral-storage=1Gi memory=128Mi
i migrate - memory=512Mi,ephemeral-storage=2Gi -
c app memory=256Mi,cpu=500m,ephemeral-storage=1Gi ephemeral-storage=2Gi,memory=1Gi
c log memory=32Mi example.com/gpu=1
e debugger
v cache emptyDir - 100Mi
v shm emptyDir Memory 64Mi
v huge emptyDir HugePages-2Mi -
v host hostPath
v cfg configMap
v token secret
v api projected
v info downwardAPI
v repo gitRepo`, ""},
	// A forged mirror pod: the kubelet's annotations, and a controller
	// reference to a Node, but another node than the one it runs on.
	{`ns tenant
name forged
node node-a
ann kubernetes.io/config.mirror=0123abcd
ann kubernetes.io/config.source=file
owner v1 Node node-b node-uid true
c app memory=1Gi memory=1Gi`, "node-uid"},
	// The same forgery naming the right node but a Node that went.
	{`ns tenant
name forged-uid
node node-a
ann kubernetes.io/config.mirror=0123abcd
owner v1 Node node-a old-node-uid true
c app memory=1Gi memory=1Gi`, "node-uid"},
	// The node's own mirror pod of a static pod.
	{`ns kube-system
name etcd-node-a
node node-a
prio 2000001000
ann kubernetes.io/config.mirror=0123abcd
ann kubernetes.io/config.source=file
owner v1 Node node-a node-uid true
c etcd cpu=100m,memory=100Mi -`, "node-uid"},
	// Odd quantities: negative, fractional, beyond int64, tiny; a huge
	// priority, a negative grace period, controller unset.
	{`ns odd
name odd
prio -2147483648
grace -1
owner apps/v1 DaemonSet ds ds-uid nil
c a memory=-1Mi,ephemeral-storage=1e30 memory=0.5,ephemeral-storage=-5
c b memory=9223372036854775807,ephemeral-storage=8Ei ephemeral-storage=100000000000E
i c OnFailure memory=1n,hugepages-1Gi=1e19 cpu=1e-9
pod memory=-1Gi ephemeral-storage=1e30
overhead memory=9223372036854775807,ephemeral-storage=-1
v x emptyDir - -1Gi
v y emptyDir Memory 1e30
v z emptyDir Bogus 0.5`, ""},
	// Guaranteed, controller false, no namespace.
	{`name g
prio 2147483647
owner apps/v1 StatefulSet s s-uid false
c a cpu=1,memory=1Gi cpu=1000m,memory=1073741824
i b - - cpu=1,memory=1Gi`, ""},
}

// FuzzConvert builds a pod from what a tenant may write (fuzzPod) and
// converts it. Whatever the pod: convert does not panic, gives the same
// result and notes twice, leaves its argument alone, and gives for the
// slimmed pod of the informer's cache what it gives for the whole one; no
// byte count is negative; the pod is Critical only at system-critical
// priority or as the node's own mirror pod (mirror annotation and a
// controller ownerReference to the Node v1 it is bound to, of nodeUID when
// that is set); its QoS class is qos.Class's.
func FuzzConvert(f *testing.F) {
	for _, s := range convertSeeds {
		f.Add(s.spec, s.nodeUID)
	}
	f.Fuzz(func(t *testing.T, spec, nodeUID string) {
		pod := fuzzPod(spec)
		uid := types.UID(nodeUID)
		before := pod.DeepCopy()

		got, notes := convert(pod, uid)
		if !reflect.DeepEqual(pod, before) {
			t.Fatalf("convert changed its argument:\n got %+v\nwant %+v", pod, before)
		}
		again, againNotes := convert(pod.DeepCopy(), uid)
		if !reflect.DeepEqual(got, again) || !reflect.DeepEqual(notes, againNotes) {
			t.Fatalf("convert is not deterministic:\n%+v %q\n%+v %q", got, notes, again, againNotes)
		}
		if c := ConvertOn(pod, uid); !reflect.DeepEqual(c, got) {
			t.Fatalf("ConvertOn = %+v, convert = %+v", c, got)
		}

		// The informer's transform slims the pod in place; the cache
		// holds only the slimmed one.
		slimmed, err := slim(pod.DeepCopy())
		if err != nil {
			t.Fatalf("slim: %v", err)
		}
		if s := ConvertOn(slimmed.(*v1.Pod), uid); !reflect.DeepEqual(s, got) {
			t.Fatalf("Convert(slim(pod)) =\n%+v\nwant Convert(pod) =\n%+v", s, got)
		}

		// Knowing the Node's UID only narrows what is a mirror pod.
		if got.Mirror && !Convert(pod).Mirror {
			t.Errorf("a mirror pod on the node of UID %q is none when the UID is unknown", uid)
		}
		checkConverted(t, pod, uid, got)
	})
}

// checkConverted checks got, the conversion of pod on a node of UID
// nodeUID, against what pod says.
func checkConverted(t *testing.T, pod *v1.Pod, nodeUID types.UID, got signals.Pod) {
	t.Helper()
	if got.Namespace != pod.Namespace || got.Name != pod.Name || got.UID != string(pod.UID) {
		t.Errorf("identity %s/%s %s, want %s/%s %s", got.Namespace, got.Name, got.UID, pod.Namespace, pod.Name, pod.UID)
	}

	// No byte count below zero; an emptyDir limit only when positive.
	nonNegative := func(what string, v int64) {
		if v < 0 {
			t.Errorf("%s is negative: %d", what, v)
		}
	}
	nonNegative("MemoryRequest", got.MemoryRequest)
	nonNegative("EphemeralStorageRequest", got.EphemeralStorageRequest)
	nonNegative("EphemeralStorageLimit", got.EphemeralStorageLimit)
	for _, c := range got.Containers {
		nonNegative("container "+c.Name+" MemoryRequest", c.MemoryRequest)
		nonNegative("container "+c.Name+" EphemeralStorageRequest", c.EphemeralStorageRequest)
		nonNegative("container "+c.Name+" EphemeralStorageLimit", c.EphemeralStorageLimit)
	}
	for name, v := range got.EmptyDirLimits {
		if v <= 0 {
			t.Errorf("emptyDir %q sizeLimit %d, want positive", name, v)
		}
	}

	// The containers, app then init, in order; only app containers carry
	// an ephemeral-storage limit.
	all := append(append([]v1.Container(nil), pod.Spec.Containers...), pod.Spec.InitContainers...)
	if len(got.Containers) != len(all) {
		t.Fatalf("%d containers, want %d", len(got.Containers), len(all))
	}
	for i, c := range got.Containers {
		if c.Name != all[i].Name {
			t.Errorf("container %d is %q, want %q", i, c.Name, all[i].Name)
		}
		if i >= len(pod.Spec.Containers) && c.EphemeralStorageLimit != 0 {
			t.Errorf("init container %q has an ephemeral-storage limit %d", c.Name, c.EphemeralStorageLimit)
		}
	}

	// Priority and criticality: a pod's own annotations, without the
	// node's ownerReference, never make it critical.
	var prio int32
	if pod.Spec.Priority != nil {
		prio = *pod.Spec.Priority
	}
	if got.Priority != prio {
		t.Errorf("Priority %d, want %d", got.Priority, prio)
	}
	if got.Static {
		t.Errorf("a pod from the API server is Static")
	}
	if want := wantMirror(pod, nodeUID); got.Mirror != want {
		t.Errorf("Mirror = %v, want %v", got.Mirror, want)
	}
	if crit := prio >= signals.SystemCriticalPriority || wantMirror(pod, nodeUID); got.Critical() != crit {
		t.Errorf("Critical() = %v, want %v (priority %d, mirror %v)", got.Critical(), crit, prio, got.Mirror)
	}

	// The QoS class Kubernetes gives the pod as stored.
	if pod.Status.QOSClass == "" {
		want := qos.Class(qos.WithDefaults(pod))
		if got.QOS != signals.QOSClass(want) {
			t.Errorf("QOS %s, want %s", got.QOS, want)
		}
		if c := qos.Class(pod); c != want {
			t.Errorf("qos.Class(pod) %s, qos.Class(WithDefaults(pod)) %s", c, want)
		}
	}

	// Local volumes and emptyDir limits name volumes of the pod.
	vols := map[string]*v1.Volume{}
	for i := range pod.Spec.Volumes {
		vols[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	for _, name := range got.LocalVolumes {
		v := vols[name]
		if v == nil || v.Secret != nil || v.Projected != nil || v.DownwardAPI != nil {
			t.Errorf("local volume %q is not a disk-backed volume of the pod", name)
		}
	}
	for name := range got.EmptyDirLimits {
		if v := vols[name]; v == nil || v.EmptyDir == nil {
			t.Errorf("emptyDir limit for %q, which is not an emptyDir of the pod", name)
		}
	}
}

// wantMirror is the brief's rule, spelled out apart from isMirror: the
// mirror annotation, a node name, and a first controller ownerReference
// (the API server allows only one) of Kind Node, APIVersion v1, named as
// spec.nodeName and, when nodeUID is known, of that UID.
func wantMirror(pod *v1.Pod, nodeUID types.UID) bool {
	if _, ok := pod.Annotations[configMirrorAnnotation]; !ok || pod.Spec.NodeName == "" {
		return false
	}
	for _, r := range pod.OwnerReferences {
		if r.Controller == nil || !*r.Controller {
			continue
		}
		return r.Kind == "Node" && r.APIVersion == "v1" && r.Name == pod.Spec.NodeName &&
			(nodeUID == "" || r.UID == nodeUID)
	}
	return false
}

// fuzzPod builds a pod from spec, one field per line, words separated by
// white space, "-" for an empty word; lines it cannot read, and quantities
// resource.ParseQuantity refuses, are left out:
//
//	ns NAMESPACE | name NAME | uid UID | node NODENAME
//	prio INT32 | grace INT64          (absent: nil)
//	ann KEY=VALUE | label KEY=VALUE   (no "=": an empty value)
//	owner APIVERSION KIND NAME UID true|false|nil
//	c NAME REQUESTS LIMITS            an app container
//	i NAME RESTARTPOLICY REQUESTS LIMITS   an init container (Always: a sidecar)
//	e NAME                            an ephemeral container
//	pod REQUESTS LIMITS               spec.resources
//	overhead LIST
//	v NAME emptyDir MEDIUM SIZELIMIT | v NAME hostPath|configMap|secret|projected|downwardAPI|gitRepo|none
//
// where REQUESTS, LIMITS and LIST are RESOURCE=QUANTITY,... or "-".
func fuzzPod(spec string) *v1.Pod {
	pod := &v1.Pod{}
	for line := range strings.Lines(spec) {
		w := strings.Fields(line)
		if len(w) < 2 {
			continue
		}
		for i := range w {
			if w[i] == "-" {
				w[i] = ""
			}
		}
		arg := func(i int) string {
			if i < len(w) {
				return w[i]
			}
			return ""
		}
		switch w[0] {
		case "ns":
			pod.Namespace = w[1]
		case "name":
			pod.Name = w[1]
		case "uid":
			pod.UID = types.UID(w[1])
		case "node":
			pod.Spec.NodeName = w[1]
		case "prio":
			if n, err := strconv.ParseInt(w[1], 10, 32); err == nil {
				pod.Spec.Priority = new(int32(n))
			}
		case "grace":
			if n, err := strconv.ParseInt(w[1], 10, 64); err == nil {
				pod.Spec.TerminationGracePeriodSeconds = new(n)
			}
		case "ann", "label":
			k, v, _ := strings.Cut(w[1], "=")
			m := &pod.Annotations
			if w[0] == "label" {
				m = &pod.Labels
			}
			if *m == nil {
				*m = map[string]string{}
			}
			(*m)[k] = v
		case "owner":
			ref := metav1.OwnerReference{APIVersion: arg(1), Kind: arg(2), Name: arg(3), UID: types.UID(arg(4))}
			switch arg(5) {
			case "true":
				ref.Controller = new(true)
			case "false":
				ref.Controller = new(false)
			}
			pod.OwnerReferences = append(pod.OwnerReferences, ref)
		case "c":
			pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{
				Name: w[1], Resources: v1.ResourceRequirements{Requests: fuzzList(arg(2)), Limits: fuzzList(arg(3))},
			})
		case "i":
			c := v1.Container{Name: w[1], Resources: v1.ResourceRequirements{Requests: fuzzList(arg(3)), Limits: fuzzList(arg(4))}}
			if p := arg(2); p != "" {
				c.RestartPolicy = new(v1.ContainerRestartPolicy(p))
			}
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
		case "e":
			pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers,
				v1.EphemeralContainer{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: w[1], Image: "busybox"}})
		case "pod":
			pod.Spec.Resources = &v1.ResourceRequirements{Requests: fuzzList(arg(1)), Limits: fuzzList(arg(2))}
		case "overhead":
			pod.Spec.Overhead = fuzzList(w[1])
		case "v":
			pod.Spec.Volumes = append(pod.Spec.Volumes, fuzzVolume(w[1], arg(2), arg(3), arg(4)))
		}
	}
	return pod
}

// fuzzList parses RESOURCE=QUANTITY,...; nil for "".
func fuzzList(s string) v1.ResourceList {
	if s == "" {
		return nil
	}
	l := v1.ResourceList{}
	for item := range strings.SplitSeq(s, ",") {
		name, qs, _ := strings.Cut(item, "=")
		if q, ok := fuzzQuantity(qs); ok {
			l[v1.ResourceName(name)] = q
		}
	}
	return l
}

// maxFuzzExponent bounds the decimal exponent of the quantities fuzzPod
// builds. Parsing and comparing such a quantity costs time linear in its
// exponent in apimachinery (Cmp(1e3000000, 0) takes 0.3 s; 1e2147483647
// does not finish): evictd bounds absurd magnitudes before it compares
// anything (qos.WithDefaults; TestWithDefaults has 1e3000000), but the
// fuzzer's own parse and checks would stall on them.
const maxFuzzExponent = 1000

// fuzzQuantity parses s as resource.ParseQuantity does; false when it
// does not parse or its exponent is beyond maxFuzzExponent.
func fuzzQuantity(s string) (resource.Quantity, bool) {
	if i := strings.LastIndexAny(s, "eE"); i >= 0 {
		if e, err := strconv.ParseInt(s[i+1:], 10, 64); err == nil && (e > maxFuzzExponent || e < -maxFuzzExponent) {
			return resource.Quantity{}, false
		}
	}
	q, err := resource.ParseQuantity(s)
	return q, err == nil
}

// fuzzVolume is a volume of that name and kind; an emptyDir has medium
// and, when it parses, sizeLimit.
func fuzzVolume(name, kind, medium, size string) v1.Volume {
	v := v1.Volume{Name: name}
	switch kind {
	case "emptyDir":
		v.EmptyDir = &v1.EmptyDirVolumeSource{Medium: v1.StorageMedium(medium)}
		if q, ok := fuzzQuantity(size); ok {
			v.EmptyDir.SizeLimit = &q
		}
	case "hostPath":
		v.HostPath = &v1.HostPathVolumeSource{Path: "/var/log"}
	case "configMap":
		v.ConfigMap = &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: name}}
	case "secret":
		v.Secret = &v1.SecretVolumeSource{SecretName: name}
	case "projected":
		v.Projected = &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}}}}
	case "downwardAPI":
		v.DownwardAPI = &v1.DownwardAPIVolumeSource{}
	case "gitRepo":
		v.GitRepo = &v1.GitRepoVolumeSource{Repository: "https://example.com/r.git"}
	}
	return v
}

// TestFuzzPod: the seeds of FuzzConvert build the pods they describe.
func TestFuzzPod(t *testing.T) {
	web := fuzzPod(convertSeeds[0].spec)
	always := v1.ContainerRestartPolicyAlways
	if web.Namespace != "shop" || web.Spec.NodeName != "node-a" || *web.Spec.Priority != 1000 ||
		len(web.Spec.Containers) != 2 || len(web.Spec.InitContainers) != 2 || len(web.Spec.EphemeralContainers) != 1 ||
		!reflect.DeepEqual(web.Spec.InitContainers[0].RestartPolicy, &always) || web.Spec.InitContainers[1].RestartPolicy != nil ||
		len(web.Spec.Volumes) != 9 || web.Spec.Resources == nil || len(web.Spec.Resources.Requests) != 3 ||
		!web.Spec.Containers[0].Resources.Limits.Memory().Equal(resource.MustParse("1Gi")) {
		t.Errorf("web pod: %d containers, %d init, %d ephemeral, %d volumes, resources %+v", len(web.Spec.Containers),
			len(web.Spec.InitContainers), len(web.Spec.EphemeralContainers), len(web.Spec.Volumes), web.Spec.Resources)
	}
	if got := Convert(web); got.QOS != signals.Burstable || got.Critical() {
		t.Errorf("Convert(web) = %+v, want Burstable, not critical", got)
	}
	odd := fuzzPod(convertSeeds[4].spec)
	if got := Convert(odd); got.Containers[0].EphemeralStorageRequest != math.MaxInt64 || got.Containers[0].MemoryRequest != 0 {
		t.Errorf("Convert(odd).Containers[0] = %+v, want ephemeral-storage clamped to MaxInt64 and a negative memory request at 0", got.Containers[0])
	}
	for _, s := range convertSeeds[1:3] {
		if got := ConvertOn(fuzzPod(s.spec), types.UID(s.nodeUID)); got.Critical() {
			t.Errorf("forged mirror pod %s is critical", got.Name)
		}
	}
	if got := ConvertOn(fuzzPod(convertSeeds[3].spec), "node-uid"); !got.Mirror {
		t.Errorf("the node's mirror pod is not a mirror: %+v", got)
	}
}
