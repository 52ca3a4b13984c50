package manager

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// shadowSource is a memory source with shadows, as signals/host's: each
// Observe stamps the observation in force (working-set-1.37) and the
// other formulas with the pass's time.
type shadowSource struct {
	mu      sync.Mutex
	inForce signals.Observation // Time is set at Observe
	others  []signals.MemoryShadow
	err     error // the observation in force's error
	// frozen keeps last as it is, as if the shadows were another
	// source's, which was not asked.
	frozen bool
	last   signals.MemoryShadows
}

func (s *shadowSource) Observe(_ context.Context, now time.Time) ([]signals.Observation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.inForce
	o.Signal, o.Time = signals.MemoryAvailable, now
	if s.frozen {
		return []signals.Observation{o}, nil
	}
	s.last = signals.MemoryShadows{Time: now, InForce: signals.FormulaWorkingSet137}
	if s.err != nil {
		return nil, s.err
	}
	s.last.Shadows = append(s.last.Shadows, signals.MemoryShadow{Formula: signals.FormulaWorkingSet137, Observation: o})
	for _, sh := range s.others {
		if sh.Err == nil {
			sh.Observation.Signal, sh.Observation.Time = signals.MemoryAvailable, now
		}
		s.last.Shadows = append(s.last.Shadows, sh)
	}
	return []signals.Observation{o}, nil
}

func (s *shadowSource) MemoryShadows() signals.MemoryShadows {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

func shadowOf(f signals.MemoryFormula, available, capacity int64) signals.MemoryShadow {
	return signals.MemoryShadow{Formula: f, Observation: signals.Observation{Available: available, Capacity: capacity}}
}

// TestLoopCountsShadowThresholdsMet: a pass counts for a formula not in
// force when it alone would have met a memory.available threshold (hard or
// soft, a percentage taken of its own capacity), and not when the formula
// in force meets one too; the shadows are exported, and never evict.
func TestLoopCountsShadowThresholdsMet(t *testing.T) {
	const capacity = 10240 * mi
	tests := []struct {
		name    string
		src     *shadowSource
		want    map[signals.MemoryFormula]float64 // counted passes; a formula absent has no series
		gauges  map[signals.MemoryFormula]int64   // evictd_memory_shadow_available_bytes; absent: no series
		evicted int
	}{{
		name: "memavailable alone below the hard threshold",
		src: &shadowSource{inForce: signals.Observation{Available: 4096 * mi, Capacity: capacity}, others: []signals.MemoryShadow{
			shadowOf(signals.FormulaWorkingSet136, 4096*mi, capacity),
			shadowOf(signals.FormulaMemAvailable, 50*mi, capacity),
		}},
		want:   map[signals.MemoryFormula]float64{signals.FormulaWorkingSet136: 0, signals.FormulaMemAvailable: 1},
		gauges: map[signals.MemoryFormula]int64{signals.FormulaWorkingSet137: 4096 * mi, signals.FormulaWorkingSet136: 4096 * mi, signals.FormulaMemAvailable: 50 * mi},
	}, {
		name: "the formula in force meets it too: not counted, and it evicts",
		src: &shadowSource{inForce: signals.Observation{Available: 50 * mi, Capacity: capacity}, others: []signals.MemoryShadow{
			shadowOf(signals.FormulaWorkingSet136, 50*mi, capacity),
			shadowOf(signals.FormulaMemAvailable, 40*mi, capacity),
		}},
		want:    map[signals.MemoryFormula]float64{signals.FormulaWorkingSet136: 0, signals.FormulaMemAvailable: 0},
		gauges:  map[signals.MemoryFormula]int64{signals.FormulaWorkingSet137: 50 * mi, signals.FormulaWorkingSet136: 50 * mi, signals.FormulaMemAvailable: 40 * mi},
		evicted: 1,
	}, {
		// The soft threshold is 10%: 1024Mi of the capacity in force, 4096Mi
		// of swap-aware's 40960Mi, which its 3000Mi is below.
		name: "a percentage of the formula's own capacity",
		src: &shadowSource{inForce: signals.Observation{Available: 1500 * mi, Capacity: capacity}, others: []signals.MemoryShadow{
			shadowOf(signals.FormulaSwapAware, 3000*mi, 4*capacity),
		}},
		want:   map[signals.MemoryFormula]float64{signals.FormulaSwapAware: 1},
		gauges: map[signals.MemoryFormula]int64{signals.FormulaWorkingSet137: 1500 * mi, signals.FormulaSwapAware: 3000 * mi},
	}, {
		name: "a formula in error: no series, nothing counted, the others as usual",
		src: &shadowSource{inForce: signals.Observation{Available: 4096 * mi, Capacity: capacity}, others: []signals.MemoryShadow{
			shadowOf(signals.FormulaWorkingSet136, 50*mi, capacity),
			{Formula: signals.FormulaMemAvailable, Err: errors.New("parse /proc/meminfo: no MemAvailable line")},
		}},
		want:   map[signals.MemoryFormula]float64{signals.FormulaWorkingSet136: 1},
		gauges: map[signals.MemoryFormula]int64{signals.FormulaWorkingSet137: 4096 * mi, signals.FormulaWorkingSet136: 50 * mi},
	}, {
		name: "memory.available unread: nothing exported or counted",
		src:  &shadowSource{err: errors.New("memory.available: read /proc/meminfo: gone")},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ths := mustParse(t, thresholds.Settings{
				Hard:            map[string]string{"memory.available": "100Mi"},
				Soft:            map[string]string{"memory.available": "10%"},
				SoftGracePeriod: map[string]string{"memory.available": "1m"},
			})
			h := newHarnessTuned(t, false, ths, defaultPods(), defaultStats(), func(_ *Config, d *Deps) {
				d.Sources = []signals.Source{tt.src}
				d.Shadows = tt.src
			})
			h.next("start")
			if tt.evicted > 0 {
				h.next("wake")
			}
			h.stop()
			for _, f := range signals.MemoryFormulas() {
				got, ok := seriesValue(t, h.reg, "evictd_memory_shadow_threshold_met_passes_total", f)
				want, wantOK := tt.want[f]
				if ok != wantOK || got != want {
					t.Errorf("passes counted for %s: got %v (series %v), want %v (series %v)", f, got, ok, want, wantOK)
				}
				gotG, ok := seriesValue(t, h.reg, "evictd_memory_shadow_available_bytes", f)
				wantG, wantOK := tt.gauges[f]
				if ok != wantOK || gotG != float64(wantG) {
					t.Errorf("available by %s: got %v (series %v), want %v (series %v)", f, gotG, ok, wantG, wantOK)
				}
			}
			if got := len(h.ev.evicted()); got != tt.evicted {
				t.Errorf("got %d evictions (%v), want %d", got, h.ev.evicted(), tt.evicted)
			}
		})
	}
}

// TestLoopForgetsStaleShadows: shadows not computed at this pass are not
// exported as if current.
func TestLoopForgetsStaleShadows(t *testing.T) {
	src := &shadowSource{inForce: signals.Observation{Available: 4096 * mi, Capacity: 10240 * mi}}
	ths := mustParse(t, thresholds.Settings{Hard: map[string]string{"memory.available": "100Mi"}})
	h := newHarnessTuned(t, true, ths, defaultPods(), defaultStats(), func(_ *Config, d *Deps) {
		d.Sources = []signals.Source{src}
		d.Shadows = src
	})
	h.next("start")
	if _, ok := seriesValue(t, h.reg, "evictd_memory_shadow_available_bytes", signals.FormulaWorkingSet137); !ok {
		t.Fatal("no shadow after the first pass")
	}
	src.mu.Lock()
	src.frozen = true
	src.mu.Unlock()
	h.tick()
	h.stop()
	if v, ok := seriesValue(t, h.reg, "evictd_memory_shadow_available_bytes", signals.FormulaWorkingSet137); ok {
		t.Errorf("got a shadow of %v from the last pass, want none", v)
	}
}

// seriesValue is the value of name{formula=f} on reg, and whether it has
// such a series.
func seriesValue(t *testing.T, reg *prometheus.Registry, name string, f signals.MemoryFormula) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "formula" && lp.GetValue() == string(f) {
					return m.GetCounter().GetValue() + m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}
