package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// writeSnapshot writes a snapshot of pods pods under memory pressure for
// steps steps: the pods once, in the first step, then observations alone,
// so that the file grows by a line per step and every step ranks every pod.
func writeSnapshot(t testing.TB, path string, pods, steps int) int64 {
	t.Helper()
	var b bytes.Buffer
	b.WriteString(`{"args": ["--eviction-hard=memory.available<500Mi"], "steps": [` + "\n")
	for s := range steps {
		if s > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `{"at": "%ds", "observations": {"memory.available": {"available": "100Mi", "capacity": "16Gi"}}`, s*10)
		if s == 0 {
			b.WriteString(`, "pods": [`)
			for p := range pods {
				if p > 0 {
					b.WriteString(",")
				}
				fmt.Fprintf(&b, "\n"+`{"name": "pod-%05d", "requests": {"memory": "%dMi"}, "usage": {"memory": "%dMi"}}`, p, 10+p%7, 20+p%13)
			}
			b.WriteString("]")
		}
		b.WriteString("}")
	}
	b.WriteString("\n]}\n")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return int64(b.Len())
}

// heapProbe passes what simulate writes to w and, at the start of every
// every-th step's output (the first one included), collects garbage and
// records the live heap: what simulate still holds while it writes. A
// write of many steps (a replay decided whole, then written) is measured
// once, at its start.
type heapProbe struct {
	w      io.Writer
	every  int
	steps  int
	peak   uint64
	sample int
}

func (p *heapProbe) Write(b []byte) (int, error) {
	n := bytes.Count(b, []byte("== at +")) + bytes.Count(b, []byte(`"at": "+`))
	measured := false
	for range n {
		if !measured && p.steps%p.every == 0 {
			p.measure()
			measured = true
		}
		p.steps++
	}
	return p.w.Write(b)
}

func (p *heapProbe) measure() {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	p.peak = max(p.peak, ms.HeapAlloc)
	p.sample++
}

// simulatePeak runs simulate on the snapshot at path and returns the most
// live heap seen while it wrote its steps, less what was live before.
func simulatePeak(t *testing.T, path, output string, steps int) uint64 {
	t.Helper()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	probe := &heapProbe{w: io.Discard, every: max(1, steps/20)}
	var errb bytes.Buffer
	if code := run([]string{"simulate", "--snapshot", path, "-o", output}, probe, &errb); code != 0 {
		t.Fatalf("simulate: exit %d: %s", code, errb.String())
	}
	if probe.steps != steps {
		t.Fatalf("simulate -o %s wrote %d steps, want %d", output, probe.steps, steps)
	}
	return probe.peak - min(probe.peak, base)
}

// TestSimulateMemoryBoundedInSteps checks that what simulate holds grows
// with the snapshot, not with its steps times its pods: ten times the
// steps over 1,000 pods may add what the snapshot holds per step (its
// observations), not a ranking of the pods per step. Kept rankings (the
// whole replay decided before it is written, or each step's result kept)
// add hundreds of bytes per pod and step; the bound is 16.
func TestSimulateMemoryBoundedInSteps(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 2,200 steps of 1,000 pods (about 10 s)")
	}
	const pods, few, many = 1000, 100, 1000
	dir := t.TempDir()
	fewPath, manyPath := filepath.Join(dir, "few.json"), filepath.Join(dir, "many.json")
	fewSize := writeSnapshot(t, fewPath, pods, few)
	manySize := writeSnapshot(t, manyPath, pods, many)
	for _, output := range []string{"text", "json"} {
		t.Run(output, func(t *testing.T) {
			fewPeak := simulatePeak(t, fewPath, output, few)
			manyPeak := simulatePeak(t, manyPath, output, many)
			growth := int64(manyPeak) - int64(fewPeak)
			perStep := growth / (many - few)
			t.Logf("%d pods: %d steps (%d bytes of snapshot) %d KiB live at most, %d steps (%d bytes) %d KiB: %d bytes more per step",
				pods, few, fewSize, fewPeak>>10, many, manySize, manyPeak>>10, perStep)
			if perStep > 16*pods {
				t.Errorf("the live heap grew by %d bytes per step over %d pods (%d KiB for %d steps, %d KiB for %d), want at most %d: simulate keeps what it has written",
					perStep, pods, fewPeak>>10, few, manyPeak>>10, many, 16*pods)
			}
		})
	}
}

// TestSimulateOverCap checks that a snapshot of 70 MiB, past the 64 MiB
// cap, is refused with an error that says so, through the command: not
// the JSON decoder's "unexpected EOF" at the cut.
func TestSimulateOverCap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge.json")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	w.WriteString(`{"observations": {"memory.available": {"available": "100Mi", "capacity": "16Gi"}}, "pods": [`)
	n := 0
	for size := 0; size < 70<<20; n++ {
		sep := ",\n"
		if n == 0 {
			sep = "\n"
		}
		k, _ := fmt.Fprintf(w, `%s{"name": "pod-%d", "requests": {"memory": "10Mi"}, "usage": {"memory": "20Mi"}}`, sep, n)
		size += k
	}
	w.WriteString("\n]}\n")
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCmd("simulate", "--snapshot", path)
	want := "evictd simulate: snapshot " + path + ": larger than 64 MiB, the most a snapshot may be\n"
	if code != 1 || errOut != want || out != "" {
		t.Errorf("simulate of %d pods in 70 MiB: exit %d, stderr %q, stdout %q; want exit 1, stderr %q", n, code, errOut, out, want)
	}
}
