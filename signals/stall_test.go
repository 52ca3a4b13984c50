package signals

import (
	"strings"
	"testing"
	"time"
)

func TestStallSignals(t *testing.T) {
	var stall []Signal
	for _, s := range All() {
		if s.Stall() {
			stall = append(stall, s)
			if s.Pressure() != MemoryPressure || s.Resource() != ResourceMemory {
				t.Errorf("%s: pressure %s resource %s, want memory", s, s.Pressure(), s.Resource())
			}
			if _, _, ok := s.StallLabels(); !ok {
				t.Errorf("%s: no stall labels", s)
			}
		} else if _, _, ok := s.StallLabels(); ok {
			t.Errorf("%s: stall labels on a signal that is not a stall", s)
		}
	}
	if len(stall) != 6 {
		t.Errorf("got %d stall signals %v, want 6", len(stall), stall)
	}
	if k, w, _ := MemoryPressureFullAvg60.StallLabels(); k != "full" || w != "60s" {
		t.Errorf("full.avg60 labels: got %s %s", k, w)
	}
}

func TestStallObservationCheck(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		o       Observation
		wantErr string
	}{
		{Observation{Signal: MemoryPressureFullAvg10, Available: 0, Capacity: StallScale, Time: at}, ""},
		{Observation{Signal: MemoryPressureFullAvg10, Available: StallScale, Capacity: StallScale, Time: at}, ""},
		{Observation{Signal: MemoryPressureFullAvg10, Available: -1, Capacity: StallScale, Time: at}, "stall -1 is outside 0..10000"},
		{Observation{Signal: MemoryPressureFullAvg10, Available: StallScale + 1, Capacity: StallScale, Time: at}, "stall 10001 is outside"},
		{Observation{Signal: MemoryPressureSomeAvg10, Available: 5, Capacity: 100, Time: at}, "capacity 100 is not the stall scale 10000"},
		{Observation{Signal: MemoryPressureSomeAvg10, Available: 9000, Capacity: StallScale, Time: at, Local: true}, ""},
		{Observation{Signal: MemoryAvailable, Available: 5, Capacity: 100, Time: at, Local: true}, "memory.available: only a memory.pressure.* stall can be local"},
	} {
		err := tc.o.Check()
		if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%+v: got %v, want %q", tc.o, err, tc.wantErr)
		}
	}
}

func TestFormatStall(t *testing.T) {
	for v, want := range map[int64]string{0: "0%", 1: "0.01%", 10: "0.1%", 2050: "20.5%", 2000: "20%", 3555: "35.55%", 10000: "100%"} {
		if got := FormatStall(v); got != want {
			t.Errorf("FormatStall(%d): got %q, want %q", v, got, want)
		}
	}
}

func TestStallWindow(t *testing.T) {
	for sig, want := range map[Signal]time.Duration{
		MemoryPressureSomeAvg10: 10 * time.Second, MemoryPressureFullAvg10: 10 * time.Second,
		MemoryPressureSomeAvg60: time.Minute, MemoryPressureFullAvg60: time.Minute,
		MemoryPressureSomeAvg300: 5 * time.Minute, MemoryPressureFullAvg300: 5 * time.Minute,
		MemoryAvailable: 0, PIDAvailable: 0,
	} {
		if got := sig.StallWindow(); got != want {
			t.Errorf("%s: got %s, want %s", sig, got, want)
		}
	}
}
