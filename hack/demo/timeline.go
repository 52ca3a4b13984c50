package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/internal/testing/testnode"
)

// watcher follows the story once the hungry pod is created, polling the
// API server and evictd's /metrics, and prints each change once.
type watcher struct {
	n     *testnode.Node
	c     clock
	o     options
	since time.Time
	good  []wellBehaved

	seenEvents  map[string]bool
	condition   v1.ConditionStatus // of conditionType, "" before it is seen
	conditionOn time.Time          // when it last became True
	wasTrue     bool
	tainted     bool
	wasTainted  bool
	hogPhase    v1.PodPhase
	disruption  bool
	deleting    bool
	evicted     bool // the Evicted event on the hog was seen
	hogGone     time.Time
	lastSample  time.Time
}

// watch returns nil once the hog is evicted and gone, the others still run,
// and the condition has been set and cleared; an error when something else
// happens or evictBound passes with no eviction.
func (w *watcher) watch(ctx context.Context, evictBound time.Duration) error {
	evictBy := time.Now().Add(evictBound)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		every := time.Second
		if !w.hogGone.IsZero() {
			every = 2 * time.Second
		}
		if time.Since(w.lastSample) >= every {
			w.sample(ctx)
		}
		if err := w.node(ctx); err != nil {
			return err
		}
		if err := w.events(ctx); err != nil {
			return err
		}
		if w.hogGone.IsZero() {
			if err := w.hog(ctx); err != nil {
				return err
			}
			if !w.hogGone.IsZero() {
				if err := w.others(ctx); err != nil {
					return err
				}
				w.c.say("waiting for %s to clear: evictd keeps it %s after the last time a threshold was met", conditionType, w.o.transition)
			} else if time.Now().After(evictBy) {
				return fmt.Errorf("pod %s not evicted within %s of its creation", hogName, evictBound)
			}
			continue
		}
		if w.wasTrue && w.condition == v1.ConditionFalse && !w.tainted {
			if !w.wasTainted {
				return fmt.Errorf("the node never had the %s taint", taintKey)
			}
			if !w.evicted {
				return fmt.Errorf("no Evicted event on pod %s", hogName)
			}
			w.sample(ctx)
			return nil
		}
		if bound := w.o.transition + 60*time.Second; time.Since(w.hogGone) > bound {
			if !w.wasTrue {
				return fmt.Errorf("the node never had %s=True", conditionType)
			}
			return fmt.Errorf("%s=%s and taint %v %s after pod %s went away (transition period %s)",
				conditionType, w.condition, w.tainted, bound, hogName, w.o.transition)
		}
	}
}

// sample prints allocatableMemory.available and the threshold from /metrics.
func (w *watcher) sample(ctx context.Context) {
	w.lastSample = time.Now()
	body, err := w.n.EvictdGet(ctx, "/metrics")
	if err != nil {
		w.c.say("  /metrics: %v", err)
		return
	}
	avail, ok := metric(body, "evictd_signal_available", `signal="allocatableMemory.available"`)
	if !ok {
		w.c.say("  /metrics: no allocatableMemory.available yet")
		return
	}
	line := fmt.Sprintf("  allocatableMemory.available %5.0f MiB  (threshold %d Mi", avail/(1<<20), w.o.thresholdMiB)
	if met, ok := metric(body, "evictd_threshold_met", `signal="allocatableMemory.available"`); ok && met == 1 {
		line += ", MET"
	}
	line += ")"
	if p, ok := metric(body, "evictd_node_pressure", `pressure="memory"`); ok {
		line += fmt.Sprintf("  evictd_node_pressure{memory}=%g", p)
	}
	if used, ok := cgroupUsage(w.n.PodsMemoryCgroup()); ok {
		line += fmt.Sprintf("  [kubepods cgroup usage now %.0f MiB]", float64(used)/(1<<20))
	}
	w.c.say("%s", line)
}

// cgroupUsage reads the memory usage of a cgroup (v1, else v2) straight
// from the kernel, to show beside what evictd last observed.
func cgroupUsage(dir string) (int64, bool) {
	for _, f := range []string{"memory.usage_in_bytes", "memory.current"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return v, err == nil
	}
	return 0, false
}

// metric returns the value of the first sample of name whose labels contain
// label, in Prometheus text format.
func metric(body, name, label string) (float64, bool) {
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, label) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		return v, err == nil
	}
	return 0, false
}

// node prints changes of evictd's condition and taint.
func (w *watcher) node(ctx context.Context) error {
	node, err := w.n.Admin().CoreV1().Nodes().Get(ctx, w.n.Name(), metav1.GetOptions{})
	if err != nil {
		return nil //nolint:nilerr // a transient error: look again next tick
	}
	var cond *v1.NodeCondition
	for i := range node.Status.Conditions {
		if string(node.Status.Conditions[i].Type) == conditionType {
			cond = &node.Status.Conditions[i]
		}
	}
	if cond != nil && cond.Status != w.condition {
		w.condition = cond.Status
		w.c.say(">> node condition %s=%s (%s: %s)", conditionType, cond.Status, cond.Reason, cond.Message)
		if cond.Status == v1.ConditionTrue {
			w.wasTrue = true
			w.conditionOn = time.Now()
		} else if w.wasTrue {
			w.c.say("   cleared %s after the pod went away (transition period %s)", time.Since(w.hogGone).Round(100*time.Millisecond), w.o.transition)
		}
	}
	tainted := false
	for _, t := range node.Spec.Taints {
		if t.Key == taintKey {
			tainted = true
			if !w.tainted {
				w.c.say(">> node taint %s:%s added: no new pods scheduled here", t.Key, t.Effect)
			}
		}
	}
	if w.tainted && !tainted {
		w.c.say(">> node taint %s removed", taintKey)
	}
	w.tainted = tainted
	w.wasTainted = w.wasTainted || tainted
	return nil
}

// events prints the events about the hog and the node since it was
// created, and fails when another pod is evicted.
func (w *watcher) events(ctx context.Context) error {
	list, err := w.n.Admin().CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil //nolint:nilerr // a transient error: look again next tick
	}
	for _, e := range list.Items {
		if w.seenEvents[string(e.UID)] || e.CreationTimestamp.Time.Before(w.since) {
			continue
		}
		w.seenEvents[string(e.UID)] = true
		obj := e.InvolvedObject
		switch {
		case obj.Kind == "Pod" && e.Reason == "Evicted" && obj.Name != hogName:
			return fmt.Errorf("the wrong pod was evicted: %s/%s: %s", obj.Namespace, obj.Name, e.Message)
		case obj.Kind == "Pod" && e.Reason == "Evicted":
			w.evicted = true
			w.c.say(">> event %s %s on pod %s from %s:", e.Type, e.Reason, obj.Name, source(e))
			w.c.say("     %q", e.Message)
			if len(e.Annotations) > 0 {
				w.c.say("     annotations %v", e.Annotations)
			}
			if !strings.Contains(e.Message, " was using ") {
				w.c.say("     WARNING: the message names no container; the kubelet's would add \"Container app was using ..., request is 0, has larger consumption of memory.\"")
			}
		case e.Reason == "MissingClusterDNS": // the demo cluster has no DNS
		case obj.Kind == "Pod" && obj.Name == hogName, obj.Kind == "Node":
			w.c.say("   event %s %s on %s %s from %s: %s", e.Type, e.Reason, strings.ToLower(obj.Kind), obj.Name, source(e), e.Message)
		}
	}
	return nil
}

func source(e v1.Event) string {
	if e.ReportingController != "" {
		return e.ReportingController
	}
	return e.Source.Component
}

// hog follows the hungry pod until it is gone.
func (w *watcher) hog(ctx context.Context) error {
	p, err := w.n.Admin().CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, hogName, metav1.GetOptions{})
	if isNotFound(err) {
		w.hogGone = time.Now()
		w.c.say(">> pod %s is gone: evictd deleted it from the API server once its containers had stopped (Failed, reason Evicted)", hogName)
		return nil
	}
	if err != nil {
		return nil //nolint:nilerr // a transient error: look again next tick
	}
	if p.Status.Phase != w.hogPhase {
		w.hogPhase = p.Status.Phase
		w.c.say("   pod %s %s (QoS %s)", hogName, p.Status.Phase, p.Status.QOSClass)
	}
	for _, cs := range p.Status.ContainerStatuses {
		for _, st := range []v1.ContainerState{cs.State, cs.LastTerminationState} {
			if st.Terminated != nil && st.Terminated.Reason == "OOMKilled" {
				return errors.New("the kernel OOM-killed pod " + hogName + " before evictd evicted it")
			}
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue && !w.disruption {
			w.disruption = true
			w.c.say(">> pod %s has condition DisruptionTarget (%s: %s)", hogName, c.Reason, c.Message)
		}
	}
	if p.DeletionTimestamp != nil && !w.deleting {
		w.deleting = true
		w.c.say(">> pod %s is being deleted (grace %ds): the eviction went through the API server", hogName, ptrValue(p.DeletionGracePeriodSeconds))
	}
	return nil
}

// others checks that the well-behaved pods still run.
func (w *watcher) others(ctx context.Context) error {
	for _, g := range w.good {
		p, err := w.n.Admin().CoreV1().Pods(g.pod.Namespace).Get(ctx, g.pod.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("pod %s/%s: %w", g.pod.Namespace, g.pod.Name, err)
		}
		if p.Status.Phase != v1.PodRunning || p.DeletionTimestamp != nil {
			return fmt.Errorf("pod %s/%s is %s, want it Running", p.Namespace, p.Name, p.Status.Phase)
		}
		restarts := int32(0)
		for _, cs := range p.Status.ContainerStatuses {
			restarts += cs.RestartCount
		}
		w.c.say("   pod %s/%s still Running, %d restarts (%s)", p.Namespace, p.Name, restarts, p.Status.QOSClass)
	}
	return nil
}

func ptrValue(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
