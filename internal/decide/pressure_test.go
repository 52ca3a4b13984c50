package decide

import (
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/signals"
	"github.com/evictd/evictd/thresholds"
)

// TestPressureReportsHold: while a pressure holds for its transition
// period, its message says what was observed (no threshold met now, one
// last observed met at T), not that none was met since T: passes stand
// still while an eviction waits or pods cannot be listed, and the pressure
// may have lasted well after T.
func TestPressureReportsHold(t *testing.T) {
	last := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	ev := thresholds.Evaluation{Pressure: map[signals.Pressure]thresholds.PressureState{
		signals.MemoryPressure: {Active: true, Since: last, LastObservedAt: last},
	}}
	var mem PressureReport
	for _, r := range PressureReports(ev, nil) {
		if r.Pressure == signals.MemoryPressure {
			mem = r
		}
	}
	want := "no memory threshold is met; one was last observed met at 2026-11-25T12:00:00Z; the condition holds for the transition period"
	if mem.Message != want {
		t.Errorf("message %q, want %q", mem.Message, want)
	}
	if strings.Contains(mem.Message, "met since") {
		t.Errorf("message %q claims none was met since the last observation", mem.Message)
	}
}
