package manager

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/internal/testing/hosttree"
	"github.com/evictd/evictd/signals"
)

// kindsRecorder is a PodStatsSource that remembers the kinds each pass
// asked the source it wraps for.
type kindsRecorder struct {
	PodStatsSource
	mu    sync.Mutex
	asked []signals.PodStatsKinds
}

func (r *kindsRecorder) PodStats(ctx context.Context, now time.Time, pods []signals.Pod, kinds signals.PodStatsKinds) (map[string]signals.PodStats, error) {
	r.mu.Lock()
	r.asked = append(r.asked, kinds)
	r.mu.Unlock()
	return r.PodStatsSource.PodStats(ctx, now, pods, kinds)
}

func (r *kindsRecorder) last() signals.PodStatsKinds {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.asked[len(r.asked)-1]
}

// openFilesUnder counts this process's descriptors open on files under dir.
func openFilesUnder(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(target, dir+"/") {
			n++
		}
	}
	return n
}

// podFiles lists the memory and pids files of every pod of a bench node.
func podFiles(t *testing.T, node benchNode) []string {
	t.Helper()
	var files []string
	for _, c := range []string{"memory", "pids"} {
		for _, pattern := range []string{"kubepods/pod*/*", "kubepods/*/pod*/*"} {
			m, err := filepath.Glob(filepath.Join(node.tree.Cgroup, c, pattern))
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, m...)
		}
	}
	if len(files) == 0 {
		t.Fatal("no pod files found")
	}
	return files
}

// TestIdlePassReadsNoPodFile: on a node of real cgroup v1 files, with
// every pod's memory and pids files garbled, passes with no threshold met
// ask for disk usage alone, open no pod file, warn of nothing and decide
// nothing; a pass under memory pressure asks for memory, reads the
// garbled files and says so once; with the files mended the pressured
// passes rank every pod by memory through kept-open files (two a pod,
// no pids file), and an idle pass after them keeps those files and
// reads none.
func TestIdlePassReadsNoPodFile(t *testing.T) {
	const pods = 12
	node := newBenchNode(t, t.TempDir(), pods)
	node.setRoot(t, idleRoot)
	var logs bytes.Buffer
	m, clk := newBenchManagerLogging(t, node, &logs)
	rec := &kindsRecorder{PodStatsSource: m.deps.Stats}
	m.deps.Stats = rec
	ctx := context.Background()
	pass := func() *Status {
		t.Helper()
		clk.Step(10 * time.Second)
		m.pass(ctx, "tick")
		return m.Status()
	}

	files := podFiles(t, node)
	originals := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		originals[f] = b
		// In place, as a kernel's cgroup file changes.
		if err := os.WriteFile(f, []byte("garbled\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	for i := range 3 {
		st := pass()
		checkIdlePass(t, st, pods)
		if k := rec.last(); k != signals.PodDisk {
			t.Errorf("idle pass %d asked for %s, want disk alone", i, k)
		}
	}
	if n := openFilesUnder(t, node.tree.Cgroup); n != 0 {
		t.Errorf("idle passes left %d pod files open, want none", n)
	}
	if strings.Contains(logs.String(), "pod stats") {
		t.Errorf("idle passes logged about pod stats:\n%s", logs.String())
	}

	node.setRoot(t, pressuredRoot)
	st := pass()
	if k := rec.last(); k != signals.PodMemory|signals.PodDisk {
		t.Errorf("pressured pass asked for %s, want memory and disk", k)
	}
	if dec := st.Decision; dec.Outcome != decide.OutcomeNoEvictablePod || dec.Signal != signals.MemoryAvailable {
		t.Errorf("pressured pass with garbled files: got %s for %q (%s), want none-evictable for memory.available", dec.Outcome, dec.Signal, dec.Reason)
	}
	pass()
	if got := strings.Count(logs.String(), "some pod stats could not be read"); got != 1 {
		t.Errorf("got %d warnings about pod stats over two pressured passes, want 1:\n%s", got, logs.String())
	}

	for f, b := range originals {
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		checkBenchPass(t, pass(), pods)
	}
	if !strings.Contains(logs.String(), "pod stats could not be read; those pods rank first: resolved") {
		t.Errorf("no line saying the pod stats are back:\n%s", logs.String())
	}
	// usage and memory.stat of every pod, no pids.current.
	if n := openFilesUnder(t, node.tree.Cgroup); n != 2*pods {
		t.Errorf("pressured passes keep %d pod files open, want %d", n, 2*pods)
	}

	node.setRoot(t, idleRoot)
	for f := range originals {
		if err := os.WriteFile(f, []byte("garbled\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before := logs.Len()
	checkIdlePass(t, pass(), pods)
	if k := rec.last(); k != signals.PodDisk {
		t.Errorf("idle pass after pressure asked for %s, want disk alone", k)
	}
	if after := logs.String()[before:]; strings.Contains(after, "pod stats") {
		t.Errorf("idle pass after pressure logged about pod stats:\n%s", after)
	}
	if n := openFilesUnder(t, node.tree.Cgroup); n != 2*pods {
		t.Errorf("the idle pass left %d pod files open, want the %d kept", n, 2*pods)
	}
}

// TestPassForgetsPodsGone: a pod whose cgroup is removed between
// pressured passes leaves the pod list, its kept files are closed, and
// the pass ranks the others.
func TestPassForgetsPodsGone(t *testing.T) {
	const pods = 6
	node := newBenchNode(t, t.TempDir(), pods)
	m, clk := newBenchManager(t, node)
	if n := openFilesUnder(t, node.tree.Cgroup); n != 2*pods {
		t.Fatalf("got %d pod files open, want %d", n, 2*pods)
	}
	gone := hosttree.Pod{UID: "00000001-0000-4000-8000-000000000001", QOS: benchTiers[1]}
	if err := node.tree.RemovePod(gone); err != nil {
		t.Fatal(err)
	}
	clk.Step(10 * time.Second)
	m.pass(context.Background(), "tick")
	checkBenchPass(t, m.Status(), pods-1)
	for _, c := range m.Status().Decision.Candidates {
		if c.Pod.UID == gone.UID {
			t.Errorf("the pod gone is still ranked")
		}
	}
	if n := openFilesUnder(t, node.tree.Cgroup); n != 2*(pods-1) {
		t.Errorf("got %d pod files open, want %d", n, 2*(pods-1))
	}
}
