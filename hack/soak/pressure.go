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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const allocSignal = `signal="allocatableMemory.available"`

// pressureLoop runs pressure cycles until ctx ends: a quiet period, then a
// hog sized to go --overshoot MiB past evictd's threshold, until evictd
// evicts it or --hog-timeout passes.
func (s *soak) pressureLoop(ctx context.Context) {
	for i := 0; ; i++ {
		wait := s.o.quiet
		if i == 0 {
			wait = s.o.quiet / 3
		}
		if sleep(ctx, wait) != nil {
			return
		}
		s.cycle(ctx, i)
	}
}

func (s *soak) cycle(ctx context.Context, i int) {
	body, err := s.n.EvictdGet(ctx, "/metrics")
	if err != nil {
		s.apiError("scrape before a hog", err)
		return
	}
	avail, ok1 := metricValue(body, "evictd_signal_available", allocSignal)
	thr, ok2 := metricValue(body, "evictd_threshold", allocSignal, `kind="hard"`)
	if !ok1 || !ok2 {
		s.fail("cycle %d: evictd's /metrics has no allocatableMemory.available or its hard threshold", i)
		return
	}
	mib := int((avail-thr)/(1<<20)) + s.o.overshoot
	if mib < s.o.overshoot {
		say("soak: cycle %d: allocatableMemory.available %.0f MiB is already below the threshold %.0f MiB; skipped", i, avail/(1<<20), thr/(1<<20))
		return
	}
	name := fmt.Sprintf("hog-%04d", i)
	hog := s.n.Pod(name, "alloc", "--mib", strconv.Itoa(mib), "--rate", strconv.Itoa(s.o.hogRate))
	hog.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	pods := s.n.Admin().CoreV1().Pods(hog.Namespace)
	created := time.Now()
	if _, err := pods.Create(ctx, hog, metav1.CreateOptions{}); err != nil {
		s.apiError("create "+name, err)
		return
	}
	s.mu.Lock()
	s.hogs++
	s.mu.Unlock()
	// The kernel's view of the kubepods cgroup, sampled here every 250 ms,
	// tells when the hog crossed the threshold: on a loaded machine the
	// hog can take minutes to start and to allocate, which is no fault of
	// evictd. The time limit runs from the crossing.
	var crossed time.Time
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			s.removeHog(name)
			return
		case <-tick.C:
		}
		if a, err := kubepodsAvailable(s.n.PodsMemoryCgroup()); err == nil && a < thr && crossed.IsZero() {
			crossed = time.Now()
		}
		if n%4 != 3 {
			continue
		}
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err), err == nil && evicted(p):
			after := "(the crossing was not sampled)"
			s.mu.Lock()
			s.evicted++
			if !crossed.IsZero() {
				d := time.Since(crossed)
				s.evictSecs = append(s.evictSecs, d.Seconds())
				after = fmt.Sprintf("%.1fs after the kubepods cgroup crossed the threshold", d.Seconds())
			}
			s.mu.Unlock()
			say("soak: cycle %d: %s (%d MiB at %d MiB/s, from %.0f MiB available, threshold %.0f MiB) evicted %.0fs after creation, %s",
				i, name, mib, s.o.hogRate, avail/(1<<20), thr/(1<<20), time.Since(created).Seconds(), after)
			s.removeHog(name)
			return
		case err != nil:
			s.apiError("get "+name, err)
		}
		switch {
		case !crossed.IsZero() && time.Since(crossed) > s.o.hogTimeout:
			s.mu.Lock()
			s.missed++
			s.mu.Unlock()
			s.fail("cycle %d: %s (%d MiB) not evicted within %s of the kubepods cgroup crossing the threshold", i, name, mib, s.o.hogTimeout)
			s.removeHog(name)
			return
		case crossed.IsZero() && time.Since(created) > s.o.hogStall:
			s.mu.Lock()
			s.stalled++
			s.mu.Unlock()
			say("soak: cycle %d: %s (%d MiB) did not reach the threshold within %s (the machine is too busy); deleted", i, name, mib, s.o.hogStall)
			s.removeHog(name)
			return
		}
	}
}

// kubepodsAvailable is allocatableMemory.available as the kernel has it
// now: the kubepods cgroup's limit minus its working set (usage minus
// inactive file pages), cgroup v1.
func kubepodsAvailable(dir string) (float64, error) {
	read := func(f string) (int64, error) {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return 0, err
		}
		return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	}
	limit, err1 := read("memory.limit_in_bytes")
	usage, err2 := read("memory.usage_in_bytes")
	inactive, err3 := keyedValue(filepath.Join(dir, "memory.stat"), "total_inactive_file")
	if err := errors.Join(err1, err2, err3); err != nil {
		return 0, err
	}
	return float64(limit - max(0, usage-inactive)), nil
}

// evicted reports whether the pod's deletion was requested (the Eviction
// API deletes it) or the pod failed with the reason Evicted.
func evicted(p *v1.Pod) bool {
	return p.DeletionTimestamp != nil || (p.Status.Phase == v1.PodFailed && p.Status.Reason == "Evicted")
}

// removeHog deletes the hog (when evictd has not) and waits until it is
// gone, so that the next quiet period starts with its memory freed.
func (s *soak) removeHog(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pods := s.n.Admin().CoreV1().Pods(metav1.NamespaceDefault)
	_ = pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	for {
		if _, err := pods.Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) || ctx.Err() != nil {
			return
		}
		if sleep(ctx, pause) != nil {
			return
		}
	}
}

// metricValue returns the value of the first sample of name whose labels
// contain every one of labels.
func metricValue(body, name string, labels ...string) (float64, bool) {
next:
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(line, l) {
				continue next
			}
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		return v, err == nil
	}
	return 0, false
}

// metricSum returns the sum of every sample of name (all label sets), or
// its single unlabelled sample.
func metricSum(body, name string) float64 {
	var sum float64
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			sum += v
		}
	}
	return sum
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }
