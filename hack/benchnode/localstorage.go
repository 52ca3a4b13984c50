package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/evictd/evictd/internal/testing/testnode"
)

// The local-storage scenario (--scenario local-storage): a pod writes
// lsWriteMiB into an emptyDir whose sizeLimit is lsLimitMiB, with the
// kubelet's localStorageCapacityIsolation on (its default, which
// ephemeral-storage scheduling needs) and its thresholds off, and evictd
// beside it with the arguments of the side. Each run records which agent
// evicted the pod (the Evicted events' source) and how long after the
// data was written (the workload's "ready" line in its CRI log) the pod
// was seen evicted.
const (
	lsLimitMiB = 20
	lsWriteMiB = 60
)

// localStorageSides are the evictd arguments of the local-storage
// scenario's sides; the kubelet is the same for all.
func localStorageSides() map[string][]string {
	return map[string][]string{
		// evictd's defaults: both agents evict them, evictd with 10 s
		// passes and volumes walked again after 10 s.
		"evictd": {},
		// Both, evictd walking and deciding every 2 s.
		"evictd-2s": {"--housekeeping-interval=2s", "--volume-stats-agg-period=2s"},
		// The kubelet alone: evictd leaves the pods to it, seeing the
		// node's ephemeral-storage capacity.
		"kubelet": {"--local-storage-eviction=kubelet"},
	}
}

// lsResult is one run of the local-storage scenario.
type lsResult struct {
	side    string
	rep     int
	written time.Time // the workload's line after its data was synced
	seen    time.Time // the pod seen evicted (DisruptionTarget, Failed/Evicted or deleted)
	by      []string  // the Evicted events' sources, in order
}

func (r lsResult) line() string {
	return fmt.Sprintf("run scenario=local-storage side=%s rep=%d written->evicted=%sms by=%s", r.side, r.rep, ms(r.written, r.seen), strings.Join(r.by, ","))
}

func runLocalStorage(ctx context.Context, cfg config, n *testnode.Node, logf func(string, ...any), out io.Writer) error {
	known := localStorageSides()
	var results []lsResult
	for _, name := range cfg.sides {
		args, ok := known[name]
		if !ok {
			return fmt.Errorf("--sides: %q is not a side of the local-storage scenario (evictd, evictd-2s, kubelet)", name)
		}
		if err := n.StopEvictd(); err != nil {
			return err
		}
		logf("starting evictd %s", strings.Join(args, " "))
		if err := n.StartEvictd(ctx, args...); err != nil {
			return err
		}
		for rep := 1; rep <= cfg.reps; rep++ {
			r, err := localStorageRun(ctx, cfg, n, name, rep)
			if err != nil {
				return fmt.Errorf("side %s rep %d: %w", name, rep, err)
			}
			logf("%s", r.line())
			results = append(results, r)
		}
	}
	fmt.Fprintln(out)
	writeLocalStorageTable(out, cfg, results)
	return nil
}

func localStorageRun(ctx context.Context, cfg config, n *testnode.Node, side string, rep int) (lsResult, error) {
	r := lsResult{side: side, rep: rep}
	name := fmt.Sprintf("ls-%s-%d", side, rep)
	pod := n.Pod(name, "write", "--dir", "/data", "--mib", fmt.Sprint(lsWriteMiB))
	limit := resource.MustParse(fmt.Sprintf("%dMi", lsLimitMiB))
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: &limit}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	pods := n.Admin().CoreV1().Pods(pod.Namespace)

	ws, stopWatch, err := watchPod(ctx, pods, name)
	if err != nil {
		return r, err
	}
	defer stopWatch()
	// Both agents' passes have a phase; the pod starts at a random point
	// of them.
	if cfg.jitter > 0 {
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(rand.N(cfg.jitter)):
		}
	}
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return r, fmt.Errorf("create pod: %w", err)
	}
	b := &bench{n: n, logf: func(string, ...any) {}}
	defer b.deletePod(context.WithoutCancel(ctx), pod.Namespace, name)

	var logFile *os.File
	defer func() {
		if logFile != nil {
			logFile.Close()
		}
	}()
	deadline := time.Now().Add(cfg.runTimeout)
	for time.Now().Before(deadline) {
		p, evictedAt, _ := ws.get()
		if logFile == nil && p != nil && p.UID != "" {
			logFile, _ = os.Open(filepath.Join(n.PodLogsDir(), fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID), "app", "0.log"))
		}
		if !evictedAt.IsZero() {
			r.seen = evictedAt
			break
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	if r.seen.IsZero() {
		return r, fmt.Errorf("pod %s not evicted in %s", name, cfg.runTimeout)
	}
	// The slower agent's next pass, had it seen the pod too: two 10 s
	// intervals.
	time.Sleep(12 * time.Second)
	if logFile != nil {
		if _, err := logFile.Seek(0, io.SeekStart); err == nil {
			data, _ := io.ReadAll(logFile)
			for line := range strings.SplitSeq(string(data), "\n") {
				if strings.Contains(line, "workload: ready") {
					r.written, _ = criStamp(line)
				}
			}
		}
	}
	evs, err := n.Admin().CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.name": name, "reason": "Evicted"}.String()})
	if err != nil {
		return r, fmt.Errorf("list events: %w", err)
	}
	slices.SortFunc(evs.Items, func(a, b v1.Event) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	for _, e := range evs.Items {
		for range max(int(e.Count), 1) {
			r.by = append(r.by, e.Source.Component)
		}
	}
	return r, nil
}

func writeLocalStorageTable(w io.Writer, cfg config, results []lsResult) {
	fmt.Fprintf(w, "Local storage: a pod writes %d MiB into an emptyDir with sizeLimit %d Mi; the kubelet's localStorageCapacityIsolation on, its thresholds off; %d runs per side.\n\n",
		lsWriteMiB, lsLimitMiB, cfg.reps)
	fmt.Fprintln(w, "| side | evicted first by the kubelet | by evictd | evicted twice | written → evicted, ms (median) | (p99) |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
	for _, side := range cfg.sides {
		var kubelet, evictd, twice int
		var times []float64
		for _, r := range results {
			if r.side != side {
				continue
			}
			if len(r.by) > 0 {
				switch r.by[0] {
				case "kubelet":
					kubelet++
				case "evictd":
					evictd++
				}
			}
			if len(r.by) > 1 {
				twice++
			}
			if v, ok := msBetween(r.written, r.seen); ok {
				times = append(times, v)
			}
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %s | %s |\n", side, kubelet, evictd, twice, median(times, whole), p99(times, whole))
	}
}
