package fleet

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/evictd/evictd/internal/testing/testcluster"
)

// KubeletTiming is when an emulated kubelet writes (KEP-589).
type KubeletTiming struct {
	// LeaseEvery is the node Lease's renew interval; default 10 s, each
	// interval stretched by up to 4% (the kubelet's jitter).
	LeaseEvery time.Duration
	// ReportEvery is nodeStatusReportFrequency, how often an unchanged
	// status is reported; default 5 min, each interval drawn in ±50% of it.
	ReportEvery time.Duration
}

// DefaultKubeletTiming is a kubelet's: the Lease every 10 s, the status
// every 5 min.
var DefaultKubeletTiming = KubeletTiming{LeaseEvery: 10 * time.Second, ReportEvery: 5 * time.Minute}

func (t KubeletTiming) withDefaults() KubeletTiming {
	if t.LeaseEvery <= 0 {
		t.LeaseEvery = DefaultKubeletTiming.LeaseEvery
	}
	if t.ReportEvery <= 0 {
		t.ReportEvery = DefaultKubeletTiming.ReportEvery
	}
	return t
}

// Lease retries after a failure back off from leaseRetryMin to
// leaseRetryMax, as the kubelet's lease controller does.
const (
	leaseRetryMin = 200 * time.Millisecond
	leaseRetryMax = 7 * time.Second
)

// kubeletUser is the identity of node's emulated kubelet: the Node
// authorizer and NodeRestriction treat it as that node's kubelet.
func kubeletUser(node string) string { return "system:node:" + node }

// kubelet is the part of a kubelet that costs the API server when nothing
// happens on its node: the node Lease renewed by an update of the last
// Lease it wrote, and the status reported every ReportEvery (a GET from
// the API server's cache, then a PATCH of nodes/status with the
// conditions' heartbeats). Its watches (pods, the node, secrets and
// configmaps) are left out.
type kubelet struct {
	node   string
	client kubernetes.Interface
	timing KubeletTiming
	lease  *coordinationv1.Lease
}

func newKubelet(c *testcluster.Cluster, node string, timing KubeletTiming) (*kubelet, error) {
	client, err := kubernetes.NewForConfig(c.TokenConfig(c.Token(kubeletUser(node))))
	if err != nil {
		return nil, err
	}
	return &kubelet{node: node, client: client, timing: timing}, nil
}

// run writes until ctx is done. The first report is drawn anywhere in the
// report interval, so that the fleet's reports spread as a long-running
// fleet's do.
func (k *kubelet) run(ctx context.Context) {
	leaseAt := time.Now()
	reportAt := time.Now().Add(rand.N(k.timing.ReportEvery))
	retry := time.Duration(0)
	for {
		next := leaseAt
		if reportAt.Before(next) {
			next = reportAt
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		now := time.Now()
		if !now.Before(leaseAt) {
			if err := k.renewLease(ctx, now); err != nil {
				retry = min(max(2*retry, leaseRetryMin), leaseRetryMax)
				leaseAt = now.Add(retry)
			} else {
				retry = 0
				leaseAt = now.Add(k.timing.LeaseEvery + rand.N(k.timing.LeaseEvery/25))
			}
		}
		if !now.Before(reportAt) {
			if err := k.reportStatus(ctx, now); err != nil {
				reportAt = now.Add(k.timing.LeaseEvery)
			} else {
				reportAt = now.Add(k.timing.ReportEvery/2 + rand.N(k.timing.ReportEvery))
			}
		}
	}
}

// renewLease updates the Lease it wrote last; it creates the Lease the
// first time, and reads it again after a conflict.
func (k *kubelet) renewLease(ctx context.Context, now time.Time) error {
	leases := k.client.CoordinationV1().Leases(leaseNS)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if k.lease == nil {
		l, err := leases.Create(ctx, leaseObject(k.node, now), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			l, err = leases.Get(ctx, k.node, metav1.GetOptions{})
		}
		if err != nil {
			return err
		}
		k.lease = l
	}
	l := k.lease.DeepCopy()
	t := metav1.NewMicroTime(now)
	l.Spec.RenewTime = &t
	updated, err := leases.Update(ctx, l, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		k.lease = nil
	}
	if err != nil {
		return err
	}
	k.lease = updated
	return nil
}

// reportStatus reads the node from the API server's cache and patches the
// heartbeat of its conditions.
func (k *kubelet) reportStatus(ctx context.Context, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	nodes := k.client.CoreV1().Nodes()
	n, err := nodes.Get(ctx, k.node, metav1.GetOptions{ResourceVersion: "0"})
	if err != nil {
		return err
	}
	hb := metav1.NewTime(now.Truncate(time.Second))
	var conds []v1.NodeCondition
	for _, c := range n.Status.Conditions {
		switch c.Type {
		case v1.NodeReady, v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure:
			conds = append(conds, v1.NodeCondition{Type: c.Type, LastHeartbeatTime: hb})
		}
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": conds}})
	if err != nil {
		return err
	}
	_, err = nodes.Patch(ctx, k.node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

// finishPod does what a kubelet does once an evicted pod's containers have
// stopped: it removes the pod's cgroup and deletes the pod with grace 0.
func (k *kubelet) finishPod(ctx context.Context, n *Node, p *v1.Pod) error {
	if hp, ok := n.pods[string(p.UID)]; ok {
		if err := n.Tree.RemovePod(hp); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := k.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64(0)),
		Preconditions:      &metav1.Preconditions{UID: &p.UID},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}
