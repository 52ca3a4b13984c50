package wakeup

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// TestMemoryCheck runs the fast poll's check on cgroup files written by the
// test, after an Update with a pass's observation: 200Mi available of 1Gi,
// 100Mi above a 100Mi threshold (or 50Mi available, below it). The check
// wakes when the working set it reads flips the threshold's met state.
func TestMemoryCheck(t *testing.T) {
	const mi = 1 << 20
	q := resource.MustParse("100Mi")
	hundredMi := thresholds.Value{Quantity: &q}
	tests := []struct {
		name      string
		signal    signals.Signal
		value     *thresholds.Value // nil: 100Mi
		v2        bool
		files     map[string]string
		available int64 // the pass's; of 1Gi
		wantWake  bool
	}{
		{name: "v1 root now met", signal: signals.MemoryAvailable, available: 200 * mi,
			files:    map[string]string{"memory.usage_in_bytes": "1048576000\n", "memory.stat": "cache 1\ntotal_inactive_file 52428800\n"},
			wantWake: true}, // 1000Mi − 50Mi leaves 74Mi
		{name: "v1 root still not met", signal: signals.MemoryAvailable, available: 200 * mi,
			files: map[string]string{"memory.usage_in_bytes": "943718400\n", "memory.stat": "total_inactive_file 104857600\n"}},
		{name: "v1 root relieved", signal: signals.MemoryAvailable, available: 50 * mi,
			files:    map[string]string{"memory.usage_in_bytes": "943718400\n", "memory.stat": "total_inactive_file 104857600\n"},
			wantWake: true}, // 900Mi − 100Mi leaves 224Mi
		{name: "v2 kubepods now met", signal: signals.AllocatableMemoryAvailable, v2: true, available: 200 * mi,
			files:    map[string]string{"memory.current": "1048576000\n", "memory.stat": "anon 1\nfile 2\ninactive_file 0\n"},
			wantWake: true},
		{name: "v2 root now met: anon + file − inactive_file", signal: signals.MemoryAvailable, v2: true, available: 200 * mi,
			files:    map[string]string{"memory.stat": "anon 734003200\nfile 314572800\ninactive_file 52428800\n"},
			wantWake: true},
		// Added with wrapping, anon + file − inactive_file would be
		// -1<<63, a working set of 0 and all of the 1Gi available: a
		// wake-up for a relief that did not happen. It is an error, the
		// check skips the cgroup and the next pass reports it.
		{name: "v2 root anon + file overflows", signal: signals.MemoryAvailable, v2: true, available: 50 * mi,
			files: map[string]string{"memory.stat": "anon 9223372036854775807\nfile 1\ninactive_file 0\n"}},
		{name: "unreadable cgroup", signal: signals.MemoryAvailable, available: 50 * mi,
			files: map[string]string{"memory.stat": "total_inactive_file 0\n"}},
		// Nothing is left, as the pass would see it, which does not meet
		// a threshold of 0.
		{name: "working set above the capacity", signal: signals.MemoryAvailable, value: &thresholds.Value{Percentage: 0}, available: 200 * mi,
			files: map[string]string{"memory.usage_in_bytes": "2147483648\n", "memory.stat": "total_inactive_file 0\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			value := hundredMi
			if tt.value != nil {
				value = *tt.value
			}
			m, err := NewMemory(MemoryConfig{
				Thresholds:       []thresholds.Threshold{{Signal: tt.signal, Value: value}},
				RootDir:          dir,
				KubepodsDir:      dir,
				V2:               tt.v2,
				FastPollInterval: time.Second,
				FastPollMargin:   thresholds.Value{Percentage: 0.5},
				Clock:            clocktesting.NewFakeClock(time.Unix(0, 0)),
				Log:              testLogger(t),
			})
			if err != nil {
				t.Fatal(err)
			}
			m.Update(signals.Observations{tt.signal: {Signal: tt.signal, Available: tt.available, Capacity: 1 << 30, Time: time.Unix(0, 0)}})
			if got, _ := m.check(); got != tt.wantWake {
				t.Errorf("check: got wake %v, want %v", got, tt.wantWake)
			}
			if again, _ := m.check(); again {
				t.Error("a second check woke again with nothing changed")
			}
		})
	}
}

// usageWriter returns a function that writes a v1 cgroup's memory files
// in dir: its usage, and no inactive page cache.
func usageWriter(t *testing.T, dir string) func(usage int64) {
	return func(usage int64) {
		t.Helper()
		for name, content := range map[string]string{
			"memory.usage_in_bytes": fmt.Sprintf("%d\n", usage),
			"memory.stat":           "total_inactive_file 0\n",
		} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestMemoryCheckNext: the fast poll's check asks for its next look from
// the growth between two reads of the cgroup's files: none from the first
// read nor without growth; a quarter of the headroom left, at the rate
// seen, once memory grows.
func TestMemoryCheckNext(t *testing.T) {
	const mi = 1 << 20
	q := resource.MustParse("100Mi")
	hundredMi := thresholds.Value{Quantity: &q}
	dir := t.TempDir()
	write := usageWriter(t, dir)
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	m, err := NewMemory(MemoryConfig{
		Thresholds:       []thresholds.Threshold{{Signal: signals.MemoryAvailable, Value: hundredMi}},
		RootDir:          dir,
		FastPollInterval: time.Second,
		FastPollMargin:   thresholds.Value{Percentage: 0.5},
		Clock:            clk,
		Log:              testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	// 1Gi, 600Mi used: 424Mi available, 324Mi above the threshold.
	write(600 * mi)
	m.Update(signals.Observations{signals.MemoryAvailable: {Signal: signals.MemoryAvailable, Available: 424 * mi, Capacity: 1 << 30, Time: clk.Now()}})
	if _, next := m.check(); next != 0 {
		t.Errorf("first check: next %s, want none (no growth seen yet)", next)
	}
	clk.Step(100 * time.Millisecond)
	if _, next := m.check(); next != 0 {
		t.Errorf("check without growth: next %s, want none", next)
	}
	// 100Mi more in 100ms, 1000 MiB/s: 224Mi of headroom left lasts
	// 224ms, a tenth of it is 22.4ms.
	clk.Step(100 * time.Millisecond)
	write(700 * mi)
	if _, next := m.check(); next != 22400*time.Microsecond {
		t.Errorf("check after 100Mi in 100ms with 224Mi left: next %s, want 22.4ms", next)
	}
}

// TestMemoryCheckNextFromPass: the pass that makes the fast poll active
// paces its first check, so that memory growing fast is seen growing at
// once, not only at the second check.
func TestMemoryCheckNextFromPass(t *testing.T) {
	const mi = 1 << 20
	q := resource.MustParse("100Mi")
	dir := t.TempDir()
	write := usageWriter(t, dir)
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	m, err := NewMemory(MemoryConfig{
		Thresholds:       []thresholds.Threshold{{Signal: signals.AllocatableMemoryAvailable, Value: thresholds.Value{Quantity: &q}}},
		KubepodsDir:      dir,
		KernelMemcg:      true, // the poll idles far from the threshold
		FastPollInterval: time.Second,
		FastPollMargin:   thresholds.Value{Percentage: 0.5},
		Clock:            clk,
		Log:              testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	pass := func(available int64) {
		m.Update(signals.Observations{signals.AllocatableMemoryAvailable: {Signal: signals.AllocatableMemoryAvailable, Available: available, Capacity: 1 << 30, Time: clk.Now()}})
	}
	// Far (900Mi available of 1Gi, the margin 512Mi): the poll idles.
	write(124 * mi)
	pass(900 * mi)
	if m.fast.active.Load() {
		t.Fatal("fast poll active 800Mi above the threshold with a 512Mi margin")
	}
	// A pass 5s later sees 424Mi available: the poll starts. 20ms on,
	// its first check reads 20Mi more used, 1000 MiB/s, with 304Mi of
	// headroom left: a tenth of it lasts 30.4ms.
	clk.Step(5 * time.Second)
	write(600 * mi)
	pass(424 * mi)
	if !m.fast.active.Load() {
		t.Fatal("fast poll idle 324Mi above the threshold with a 512Mi margin")
	}
	clk.Step(20 * time.Millisecond)
	write(620 * mi)
	if _, next := m.check(); next != 30400*time.Microsecond {
		t.Errorf("first check 20Mi used past the pass's reading in 20ms: next %s, want 30.4ms", next)
	}
}

// TestMemoryFastPollAlways: the fast poll stops far from every threshold
// only when each has a kernel notification to say memory nears it again
// (v1 memcg thresholds); on v2, or with memcg notifications off, it runs
// at all times.
func TestMemoryFastPollAlways(t *testing.T) {
	q := resource.MustParse("100Mi")
	for _, tc := range []struct {
		name       string
		v2, memcg  bool
		available  int64 // of 1Gi
		wantActive bool
	}{
		{name: "v1 with memcg notifications, far", memcg: true, available: 900 << 20},
		{name: "v1 with memcg notifications, near", memcg: true, available: 150 << 20, wantActive: true},
		{name: "v1 without memcg notifications, far", available: 900 << 20, wantActive: true},
		{name: "v2, far", v2: true, memcg: true, available: 900 << 20, wantActive: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewMemory(MemoryConfig{
				Thresholds:       []thresholds.Threshold{{Signal: signals.AllocatableMemoryAvailable, Value: thresholds.Value{Quantity: &q}}},
				KubepodsDir:      t.TempDir(),
				V2:               tc.v2,
				KernelMemcg:      tc.memcg,
				FastPollInterval: 250 * time.Millisecond,
				FastPollMargin:   thresholds.Value{Percentage: 0.1},
				Clock:            clock.RealClock{},
				Log:              testLogger(t),
			})
			if err != nil {
				t.Fatal(err)
			}
			m.Update(signals.Observations{signals.AllocatableMemoryAvailable: {Signal: signals.AllocatableMemoryAvailable, Available: tc.available, Capacity: 1 << 30, Time: time.Now()}})
			if got := m.fast.active.Load(); got != tc.wantActive {
				t.Errorf("fast poll active %t, want %t", got, tc.wantActive)
			}
		})
	}
}

// TestMemoryCheckHandsOnReadings: however fast the poll checks, its
// readings go to MemoryConfig.Reads (the flight recorder, time to
// exhaustion) at most every ReadsEvery per threshold, and at once when one
// meets the threshold.
func TestMemoryCheckHandsOnReadings(t *testing.T) {
	const mi = 1 << 20
	q := resource.MustParse("100Mi")
	dir := t.TempDir()
	write := usageWriter(t, dir)
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	var handed []time.Duration
	m, err := NewMemory(MemoryConfig{
		Thresholds:       []thresholds.Threshold{{Signal: signals.MemoryAvailable, Value: thresholds.Value{Quantity: &q}}},
		RootDir:          dir,
		FastPollInterval: time.Second,
		FastPollMargin:   thresholds.Value{Percentage: 0.5},
		Clock:            clk,
		Log:              testLogger(t),
		Reads:            func(o signals.Observation) { handed = append(handed, o.Time.Sub(time.Unix(0, 0))) },
	})
	if err != nil {
		t.Fatal(err)
	}
	write(800 * mi) // 224Mi available of 1Gi
	m.Update(signals.Observations{signals.MemoryAvailable: {Signal: signals.MemoryAvailable, Available: 224 * mi, Capacity: 1 << 30, Time: clk.Now()}})
	for range 25 { // checks at 1ms to 25ms
		clk.Step(time.Millisecond)
		if wake, _ := m.check(); wake {
			t.Fatal("a check woke with the threshold still 124Mi away")
		}
	}
	want := []time.Duration{time.Millisecond, 11 * time.Millisecond, 21 * time.Millisecond}
	if fmt.Sprint(handed) != fmt.Sprint(want) {
		t.Fatalf("25 checks 1ms apart handed on readings at %v, want %v", handed, want)
	}
	clk.Step(time.Millisecond)
	write(1000 * mi) // 24Mi available: met
	if wake, _ := m.check(); !wake {
		t.Fatal("no wake-up at the check that met the threshold")
	}
	if len(handed) != 4 || handed[3] != 26*time.Millisecond {
		t.Errorf("the reading that met the threshold 5ms after the last handed on: handed %v, want it at 26ms", handed)
	}
}
