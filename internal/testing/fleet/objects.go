package fleet

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/evictd/evictd/signals"
)

// Labels and names of the fleet's objects.
const (
	pdbLabel     = "fleet.evictd.io/pdb"
	leaseNS      = "kube-node-lease"
	imagesOnNode = 50
)

// hexOf is a stable hex string of n characters derived from parts.
func hexOf(n int, parts ...any) string {
	sum := sha256.Sum256(fmt.Append(nil, parts...))
	s := hex.EncodeToString(sum[:])
	for len(s) < n {
		s += s
	}
	return s[:n]
}

// nodeObject is a Node as a kubelet registers it: labels, annotations,
// podCIDR and providerID. Its status is nodeStatus.
func nodeObject(name string, i int) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"beta.kubernetes.io/arch":                  "amd64",
				"beta.kubernetes.io/os":                    "linux",
				"kubernetes.io/arch":                       "amd64",
				"kubernetes.io/hostname":                   name,
				"kubernetes.io/os":                         "linux",
				"node.kubernetes.io/instance-type":         "m5.2xlarge",
				"topology.kubernetes.io/region":            "eu-west-1",
				"topology.kubernetes.io/zone":              fmt.Sprintf("eu-west-1%c", 'a'+i%3),
				"node-role.kubernetes.io/worker":           "",
				"failure-domain.beta.kubernetes.io/region": "eu-west-1",
				"failure-domain.beta.kubernetes.io/zone":   fmt.Sprintf("eu-west-1%c", 'a'+i%3),
			},
			Annotations: map[string]string{
				"node.alpha.kubernetes.io/ttl":                           "0",
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
				"csi.volume.kubernetes.io/nodeid":                        fmt.Sprintf(`{"ebs.csi.aws.com":"i-%s"}`, hexOf(17, name)),
				"alpha.kubernetes.io/provided-node-ip":                   fmt.Sprintf("10.1.%d.%d", i/250, 4+i%250),
				"projectcalico.org/IPv4Address":                          fmt.Sprintf("10.1.%d.%d/20", i/250, 4+i%250),
				"projectcalico.org/IPv4IPIPTunnelAddr":                   fmt.Sprintf("10.%d.%d.1", 64+i/256, i%256),
			},
		},
		Spec: v1.NodeSpec{
			PodCIDR:    fmt.Sprintf("10.%d.%d.0/24", 64+i/256, i%256),
			PodCIDRs:   []string{fmt.Sprintf("10.%d.%d.0/24", 64+i/256, i%256)},
			ProviderID: fmt.Sprintf("aws:///eu-west-1%c/i-%s", 'a'+i%3, hexOf(17, name)),
		},
	}
}

// imageRepos are the images a node has pulled, as many kubelets report
// them: a digest name and a tag name each, and a size.
var imageRepos = []string{
	"registry.k8s.io/kube-proxy", "registry.k8s.io/pause", "registry.k8s.io/coredns/coredns",
	"docker.io/calico/node", "docker.io/calico/cni", "quay.io/prometheus/node-exporter",
	"docker.io/library/nginx", "docker.io/library/redis", "docker.io/library/postgres",
	"ghcr.io/example/payments-api", "ghcr.io/example/checkout", "ghcr.io/example/search-indexer",
	"public.ecr.aws/aws-ebs-csi-driver/aws-ebs-csi-driver", "docker.io/grafana/promtail",
	"quay.io/jetstack/cert-manager-controller", "docker.io/bitnami/kafka", "docker.io/library/busybox",
}

// nodeStatus is a kubelet's status of a node with capacity and
// allocatable, conditions, addresses, nodeInfo and 50 images (about
// 15 KB of JSON in all).
func nodeStatus(name string, i int, now time.Time) v1.NodeStatus {
	rnd := rand.New(rand.NewPCG(uint64(i), 42))
	images := make([]v1.ContainerImage, 0, imagesOnNode)
	for k := range imagesOnNode {
		repo := imageRepos[k%len(imageRepos)]
		tag := fmt.Sprintf("v1.%d.%d", k/len(imageRepos), rnd.IntN(20))
		images = append(images, v1.ContainerImage{
			Names:     []string{repo + "@sha256:" + hexOf(64, repo, tag), repo + ":" + tag},
			SizeBytes: 5<<20 + rnd.Int64N(900<<20),
		})
	}
	res := func(cpu, mem, pods string) v1.ResourceList {
		return v1.ResourceList{
			v1.ResourceCPU:               resource.MustParse(cpu),
			v1.ResourceMemory:            resource.MustParse(mem),
			v1.ResourcePods:              resource.MustParse(pods),
			v1.ResourceEphemeralStorage:  resource.MustParse("104845292Ki"),
			"hugepages-1Gi":              resource.MustParse("0"),
			"hugepages-2Mi":              resource.MustParse("0"),
			"attachable-volumes-aws-ebs": resource.MustParse("25"),
		}
	}
	alloc := res("7910m", "15624840Ki", "110")
	alloc[v1.ResourceEphemeralStorage] = resource.MustParse("95551679124")
	return v1.NodeStatus{
		Capacity:    res("8", "16777216Ki", "110"),
		Allocatable: alloc,
		Phase:       "",
		Conditions:  kubeletConditions(now),
		Addresses: []v1.NodeAddress{
			{Type: v1.NodeInternalIP, Address: fmt.Sprintf("10.1.%d.%d", i/250, 4+i%250)},
			{Type: v1.NodeHostName, Address: name},
			{Type: v1.NodeInternalDNS, Address: fmt.Sprintf("ip-10-1-%d-%d.eu-west-1.compute.internal", i/250, 4+i%250)},
		},
		DaemonEndpoints: v1.NodeDaemonEndpoints{KubeletEndpoint: v1.DaemonEndpoint{Port: 10250}},
		NodeInfo: v1.NodeSystemInfo{
			MachineID:               hexOf(32, "machine", name),
			SystemUUID:              "ec2" + hexOf(29, "uuid", name),
			BootID:                  hexOf(32, "boot", name),
			KernelVersion:           "6.1.119-129.201.amzn2023.x86_64",
			OSImage:                 "Amazon Linux 2023.6.20241212",
			ContainerRuntimeVersion: "containerd://1.7.23",
			KubeletVersion:          "v1.36.3",
			KubeProxyVersion:        "v1.36.3",
			OperatingSystem:         "linux",
			Architecture:            "amd64",
		},
		Images: images,
		RuntimeHandlers: []v1.NodeRuntimeHandler{
			{Name: "", Features: &v1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: new(true), UserNamespaces: new(true)}},
			{Name: "runc", Features: &v1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: new(true), UserNamespaces: new(true)}},
			{Name: "nvidia", Features: &v1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: new(true), UserNamespaces: new(false)}},
		},
		Features: &v1.NodeFeatures{SupplementalGroupsPolicy: new(true)},
	}
}

// kubeletConditions are the conditions a healthy node's kubelet reports,
// heartbeat now.
func kubeletConditions(now time.Time) []v1.NodeCondition {
	t := metav1.NewTime(now.Truncate(time.Second))
	c := func(typ v1.NodeConditionType, status v1.ConditionStatus, reason, msg string) v1.NodeCondition {
		return v1.NodeCondition{Type: typ, Status: status, LastHeartbeatTime: t, LastTransitionTime: t, Reason: reason, Message: msg}
	}
	return []v1.NodeCondition{
		c(v1.NodeMemoryPressure, v1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
		c(v1.NodeDiskPressure, v1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
		c(v1.NodePIDPressure, v1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
		c(v1.NodeReady, v1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
	}
}

// podPlan is one pod to create on a node, and its cgroup's usage.
type podPlan struct {
	name string
	qos  signals.QOSClass
	ws   int64 // working set, bytes
	pdb  string
}

// podObject is a pod bound to node by spec.nodeName (no scheduler), with
// the requests and limits of its QoS class.
func podObject(ns, node string, p podPlan) *v1.Pod {
	c := v1.Container{
		Name:  "app",
		Image: imageRepos[len(p.name)%len(imageRepos)] + ":v1.0.1",
	}
	switch p.qos {
	case signals.Guaranteed:
		rl := v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("256Mi")}
		c.Resources = v1.ResourceRequirements{Requests: rl, Limits: rl}
	case signals.Burstable:
		c.Resources = v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("50m"), v1.ResourceMemory: resource.MustParse("64Mi")}}
	}
	labels := map[string]string{"app": p.name, "fleet.evictd.io/node": node}
	if p.pdb != "" {
		labels[pdbLabel] = p.pdb
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: ns, Labels: labels},
		Spec: v1.PodSpec{
			NodeName:                     node,
			AutomountServiceAccountToken: new(false),
			Containers:                   []v1.Container{c},
		},
	}
}

// pdbObject keeps at least one of the pods labelled name.
func pdbObject(ns, name string) *policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &one,
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{pdbLabel: name}},
		},
	}
}

// leaseObject is a kubelet's node Lease (KEP-589).
func leaseObject(node string, now time.Time) *coordinationv1.Lease {
	t := metav1.NewMicroTime(now)
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: leaseNS},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       new(node),
			LeaseDurationSeconds: new(int32(40)),
			RenewTime:            &t,
		},
	}
}
