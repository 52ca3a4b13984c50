package node

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/testing/testnode"
)

// evictedPhase is one of the experiments behind the way evictd leaves an
// evicted pod Failed with reason Evicted, as the kubelet's own eviction
// writes it (docs/ARCHITECTURE.md, "Evicted pods"): a status write alone
// does not do it. The pod's status is written as an outside evictor could
// write it (phase Failed, reason Evicted, evictd's message and
// DisruptionTarget condition), and nothing else, and the real kubelet's
// answer is watched. The kubelet (v1.37.2, the default lane's, as v1.36.3
// before it) takes a change of a pod's status alone as a reconciliation,
// not as an update of the pod: it neither stops the container nor keeps
// the status, and at its next status
// reconciliation (within 10 s) it writes phase Running back and drops the
// reason and the message. So evictd writes the status with an annotation
// of its own (evictd.io/evicted) in the same request, which the kubelet
// takes as an update: it syncs the pod at once from that copy, finds it
// terminal and stops its containers, reporting it Failed from then on;
// evictd deletes the pod once they have stopped (TestTerminalStatusOrder,
// TestWorkloadsNode). Should a kubelet keep a status written alone, this
// test fails and the annotation is to be reconsidered.
func evictedPhase(t *testing.T, n *testnode.Node) {
	pod := n.Pod("marked", "sleep")
	grace := int64(2)
	pod.Spec.TerminationGracePeriodSeconds = &grace
	p := run(t, n, labelled(pod))
	msg := "The node was low on resource: memory. Threshold quantity: 500Mi, available: 300Mi. "
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": p.UID},
		"status": map[string]any{
			"phase":   v1.PodFailed,
			"reason":  "Evicted",
			"message": msg,
			"conditions": []any{map[string]any{
				"type": v1.DisruptionTarget, "status": v1.ConditionTrue,
				"reason": decide.DisruptionTargetReason, "message": msg,
				"lastTransitionTime": metav1.Now(),
			}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Admin().CoreV1().Pods("default").Patch(t.Context(), "marked", types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("write the Failed/Evicted status: %v", err)
	}
	// The kubelet's periodic status reconciliation comes every 10 s.
	var seen []string
	prev := ""
	poll(t, "the kubelet to undo the Failed/Evicted status", 40*time.Second, func() (bool, string) {
		got, err := n.Admin().CoreV1().Pods("default").Get(t.Context(), "marked", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		state := "running"
		for _, cs := range got.Status.ContainerStatuses {
			if cs.State.Terminated != nil {
				state = "terminated"
			}
		}
		s := fmt.Sprintf("phase=%s reason=%q container %s, %d restarts", got.Status.Phase, got.Status.Reason, state, restarts(got))
		if s != prev {
			seen = append(seen, time.Now().Format("15:04:05.000 ")+s)
			prev = s
		}
		return got.Status.Phase != v1.PodFailed || got.Status.Reason != "Evicted" || got.Status.Message != msg,
			"still " + s + ": the kubelet keeps a Failed/Evicted status written alone; reconsider the annotation evictd writes with it"
	})
	t.Logf("the pod's status after the write:\n%s", strings.Join(seen, "\n"))
}

func restarts(p *v1.Pod) int32 {
	var n int32
	for _, cs := range p.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}
