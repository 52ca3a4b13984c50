package apiserver

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// evictedByStatus reports whether pod is evictd's terminal status and not
// yet deleted: phase Failed with evictd's DisruptionTarget condition. The
// kubelet v1.36 stops such a pod's containers at once and reports them
// stopped; evictd then deletes the pod, which the API server removes at
// once (its phase is terminal).
func evictedByStatus(pod *v1.Pod) bool {
	c := podCondition(pod, v1.DisruptionTarget)
	return pod.DeletionTimestamp == nil && pod.Status.Phase == v1.PodFailed &&
		c != nil && c.Status == v1.ConditionTrue && c.Reason == evictdReason
}

// reportStopped writes the pod's containers terminated, as the kubelet's
// status write after it has stopped them, keeping phase Failed.
func reportStopped(ctx context.Context, admin kubernetes.Interface, pod *v1.Pod) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := admin.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != pod.UID {
			return nil
		}
		now := metav1.Now()
		for i := range cur.Status.ContainerStatuses {
			cs := &cur.Status.ContainerStatuses[i]
			cs.Ready = false
			cs.State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", FinishedAt: now}}
		}
		_, err = admin.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// awaitGone reads the pod until it is gone, at most bound, and returns
// the last version read (pod if none) and whether it went.
func awaitGone(ctx context.Context, admin kubernetes.Interface, pod *v1.Pod, bound time.Duration) (*v1.Pod, bool) {
	last := pod
	deadline := time.Now().Add(bound)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		cur, err := admin.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) || err == nil && cur.UID != pod.UID:
			return last, true
		case err == nil:
			last = cur
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	return last, false
}

// loggedGrace is the grace period of evictd's last decision to evict
// ns/name, or line of its eviction, in its log (JSON or text), which the
// eviction carries; -1 when there is none.
func loggedGrace(log, ns, name string) int64 {
	grace := regexp.MustCompile(`gracePeriodSeconds"?[=:](\d+)`)
	ref := ns + "/" + name
	lines := strings.Split(log, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		line := lines[i]
		if !evictLine(line) ||
			!strings.Contains(line, `"pod":"`+ref+`"`) && !strings.Contains(line, "pod="+ref+" ") {
			continue
		}
		if m := grace.FindStringSubmatch(line); m != nil {
			g, _ := strconv.ParseInt(m[1], 10, 64)
			return g
		}
	}
	return -1
}

// evictLine reports whether line, of evictd's log (text or JSON), is its
// decision to evict a pod or its line of an eviction done: either names
// the eviction's grace period (a pod tried after the first, a PodDisruption
// Budget having refused that one, has only the second).
func evictLine(line string) bool {
	for _, s := range []string{"msg=decision outcome=evict ", `"msg":"decision","outcome":"evict"`, "msg=evicted ", `"msg":"evicted"`} {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}
