package evict

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/metrics"
)

// waitGone polls the pod every Config.PollInterval until it is gone (not
// found, replaced by another pod of the same name, or finished), for at most
// Config.CleanupTimeout by the injected clock. It returns nil when the pod
// is gone, an error wrapping decide.ErrNotGoneInTime with what the last look saw
// when it is not, and ctx's error when ctx ends first.
func (e *Evicter) waitGone(ctx context.Context, pod *v1.Pod) error {
	deadline := e.cfg.Clock.Now().Add(e.cfg.CleanupTimeout)
	for {
		gone, state := e.look(ctx, pod)
		if gone {
			return nil
		}
		left := deadline.Sub(e.cfg.Clock.Now())
		if left <= 0 {
			return fmt.Errorf("%w (waited %s; the pod is %s)", decide.ErrNotGoneInTime, e.cfg.CleanupTimeout, state)
		}
		t := e.cfg.Clock.NewTimer(min(e.cfg.PollInterval, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("stopped waiting for the pod to go (it is %s): %w", state, ctx.Err())
		case <-t.C():
		}
	}
}

// look reads the pod once and tells whether it is gone, and if not, in what
// state it is, for the timeout message.
func (e *Evicter) look(ctx context.Context, want *v1.Pod) (bool, string) {
	pod, err := e.client.Pods(want.Namespace).Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, "gone"
	case err != nil:
		if ctx.Err() == nil {
			e.apiError(metrics.APIPodGet)
		}
		return false, fmt.Sprintf("unknown: get failed: %v", err)
	case pod.UID != want.UID:
		return true, "replaced"
	case terminal(pod):
		return true, "finished"
	case pod.DeletionTimestamp == nil:
		return false, "not terminating"
	}
	return false, fmt.Sprintf("terminating since %s with a grace period of %ds",
		pod.DeletionTimestamp.UTC().Format(time.RFC3339), ptr.Deref(pod.DeletionGracePeriodSeconds, 0))
}
