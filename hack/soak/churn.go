package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/internal/testing/testnode"
)

const churnName = "churn"

// churnSpec is the pod of the churn: the workload's sleep, Burstable with a
// request well above what it uses, so that evictd ranks it after the hog,
// and a short grace period so that deletions finish quickly.
func churnSpec(n *testnode.Node) v1.PodSpec {
	p := &v1.Pod{Spec: n.PodSpec("sleep")}
	testnode.Resources(p, "16Mi", "", "5m")
	p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	return p.Spec
}

// begin opens the CSV, records the starting counters and creates the
// churn ReplicaSet.
func (s *soak) begin(ctx context.Context) error {
	f, err := createCSV(s.o.out)
	if err != nil {
		return err
	}
	s.csv = f
	s.oomBase, _ = cgroupOOMKills(s.n.PodsMemoryCgroup())
	s.hostBase, _ = hostOOMKills()
	s.loadStart = loadAvg()
	if body, err := s.n.EvictdGet(ctx, "/metrics"); err == nil {
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, "evictd_build_info{") {
				s.buildInfo = line
			}
		}
	}
	labels := map[string]string{"app": churnName}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: churnName, Namespace: metav1.NamespaceDefault},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(int32(s.o.replicasMin)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       churnSpec(s.n),
			},
		},
	}
	if _, err := s.n.Admin().AppsV1().ReplicaSets(rs.Namespace).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create ReplicaSet %s: %w", churnName, err)
	}
	s.replicas = s.o.replicasMin
	return nil
}

// scaleLoop scales the churn ReplicaSet to a random size every
// --scale-every.
func (s *soak) scaleLoop(ctx context.Context) {
	rss := s.n.Admin().AppsV1().ReplicaSets(metav1.NamespaceDefault)
	for sleep(ctx, s.o.scaleEvery) == nil {
		r := s.o.replicasMin + rand.IntN(s.o.replicasMax-s.o.replicasMin+1)
		patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, r)
		if _, err := rss.Patch(ctx, churnName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			s.apiError("scale ReplicaSet", err)
			continue
		}
		s.mu.Lock()
		s.replicas = r
		s.mu.Unlock()
	}
}

// singlesLoop creates a BestEffort single pod every --pod-every and deletes
// the oldest when more than --singles exist.
func (s *soak) singlesLoop(ctx context.Context) {
	pods := s.n.Admin().CoreV1().Pods(metav1.NamespaceDefault)
	var live []string
	for i := 0; sleep(ctx, s.o.podEvery) == nil; i++ {
		p := s.n.Pod(fmt.Sprintf("single-%05d", i), "sleep")
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			s.apiError("create single pod", err)
		} else {
			live = append(live, p.Name)
		}
		for len(live) > s.o.singles {
			err := pods.Delete(ctx, live[0], metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)})
			if err != nil && !isNotFound(err) {
				s.apiError("delete single pod", err)
				break
			}
			live = live[1:]
		}
		s.mu.Lock()
		s.singles = i + 1
		s.mu.Unlock()
	}
}

// pause is a short wait used between polls.
const pause = time.Second
