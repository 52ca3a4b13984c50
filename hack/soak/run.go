package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/internal/testing/testnode"
)

// say prints a line with the wall time.
func say(format string, args ...any) {
	fmt.Printf("%s  %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, o options) (err error) {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	say("soak: starting a node (kubepods %d MiB, the kubelet's eviction off)", o.podsMiB)
	n, err := testnode.Start(ctx, testnode.Options{Name: "evictd-soak", PodsMemory: int64(o.podsMiB) << 20})
	if err != nil {
		return fmt.Errorf("start the node: %w", err)
	}
	defer func() {
		if cerr := copyFile(n.LogPath("evictd"), filepath.Join(o.out, "evictd.log")); cerr != nil {
			say("soak: keep evictd's log: %v", cerr)
		}
		say("soak: deleting the pods, then stopping the node")
		if derr := deletePods(n, 3*time.Minute); derr != nil {
			say("soak: %v; stopping anyway", derr)
		}
		err = errors.Join(err, n.Stop())
		say("soak: node stopped")
	}()
	say("soak: node ready in %s; starting evictd with its default thresholds, --eviction-pressure-transition-period=%s", n.ReadyIn().Round(time.Second), o.transition)
	if err := n.StartEvictd(ctx, "--eviction-pressure-transition-period="+o.transition.String()); err != nil {
		return err
	}
	pid := n.EvictdPID()
	say("soak: evictd pid %d, metrics http://%s/metrics, log %s", pid, n.MetricsAddr(), n.LogPath("evictd"))

	s := &soak{o: o, n: n, pid: pid, start: time.Now()}
	if err := s.begin(ctx); err != nil {
		return err
	}
	say("soak: %s of churn and pressure cycles; a sample every %s to %s", o.duration, o.interval, filepath.Join(o.out, "samples.csv"))

	wctx, cancel := context.WithTimeout(ctx, o.duration)
	defer cancel()
	var wg sync.WaitGroup
	for _, f := range []func(context.Context){s.scaleLoop, s.singlesLoop, s.pressureLoop} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(wctx)
		}()
	}
	serr := s.sampleLoop(wctx)
	cancel()
	wg.Wait()
	if serr != nil {
		s.fail("%v", serr)
	}
	if err := s.finish(); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if len(s.failures) > 0 {
		return fmt.Errorf("%d check(s) failed:\n  %s", len(s.failures), strings.Join(s.failures, "\n  "))
	}
	return nil
}

// soak is the state of one run.
type soak struct {
	o     options
	n     *testnode.Node
	pid   int
	start time.Time

	csv *os.File

	mu        sync.Mutex
	samples   []sample
	failures  []string
	replicas  int
	singles   int
	hogs      int // hogs created
	evicted   int // hogs evictd evicted
	missed    int // hogs that lived past --hog-timeout after the crossing
	stalled   int // hogs that did not reach the threshold within --hog-stall
	apiErrors int // failed requests of the churn and the cycles
	evictSecs []float64
	buildInfo string
	oomBase   int64 // kubepods oom_kill at the start
	hostBase  int64 // /proc/vmstat oom_kill at the start
	loadStart string
}

func (s *soak) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	say("soak: FAIL: %s", msg)
	s.mu.Lock()
	s.failures = append(s.failures, msg)
	s.mu.Unlock()
}

func (s *soak) apiError(what string, err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return
	}
	say("soak: %s: %v", what, err)
	s.mu.Lock()
	s.apiErrors++
	s.mu.Unlock()
}

// deletePods deletes the churn ReplicaSet and every pod of the default
// namespace with a 1 s grace period and waits until none is left.
func deletePods(n *testnode.Node, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	del := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)}
	_ = n.Admin().AppsV1().ReplicaSets(metav1.NamespaceDefault).DeleteCollection(ctx, del, metav1.ListOptions{})
	pods := n.Admin().CoreV1().Pods(metav1.NamespaceDefault)
	if err := pods.DeleteCollection(ctx, del, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("delete pods: %w", err)
	}
	return wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := pods.List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, nil
	})
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
