package wakeup

import (
	"testing"
	"time"
)

func TestUsageLevel(t *testing.T) {
	const mi = 1 << 20
	tests := []struct {
		name                         string
		capacity, quantity, inactive int64
		want                         int64
	}{
		{"no page cache", 16 << 30, 100 * mi, 0, 16<<30 - 100*mi},
		// 2 GiB of inactive cache lets usage reach 2 GiB higher before
		// the working set leaves less than 100Mi available.
		{"inactive cache raises the level", 16 << 30, 100 * mi, 2 << 30, 18<<30 - 100*mi},
		{"threshold above capacity", 1 << 30, 2 << 30, 0, -(1 << 30)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := UsageLevel(tt.capacity, tt.quantity, tt.inactive); got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}

func TestEventsChanged(t *testing.T) {
	const base = "low 0\nhigh 3\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n"
	tests := []struct {
		name      string
		prev, cur string
		want      bool
	}{
		{"same", base, base, false},
		{"high event", base, "low 0\nhigh 4\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n", true},
		{"oom kill", base, "low 0\nhigh 3\nmax 0\noom 1\noom_kill 1\noom_group_kill 0\n", true},
		{"key added", base, base + "sock_throttled 0\n", true},
		{"garbled", base, "high\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := eventsChanged("memory.events", []byte(tt.prev), []byte(tt.cur)); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPSISpec(t *testing.T) {
	tests := []struct {
		spec    PSISpec
		want    string
		wantErr string
	}{
		{DefaultPSISpec, "some 150000 2000000", ""},
		{PSISpec{Full: true, Stall: 500 * time.Millisecond, Window: 10 * time.Second}, "full 500000 10000000", ""},
		{PSISpec{Stall: time.Millisecond, Window: 100 * time.Millisecond}, "", "PSI trigger window 100ms: must be a whole number of microseconds from 500ms to 10s"},
		{PSISpec{Stall: time.Millisecond, Window: 11 * time.Second}, "", "PSI trigger window 11s: must be a whole number of microseconds from 500ms to 10s"},
		{PSISpec{Stall: 2 * time.Second, Window: time.Second}, "", "PSI trigger stall 2s: must be a whole number of microseconds, more than 0 and at most the window 1s"},
		{PSISpec{Window: time.Second}, "", "PSI trigger stall 0s: must be a whole number of microseconds, more than 0 and at most the window 1s"},
	}
	for _, tt := range tests {
		t.Run(tt.spec.String(), func(t *testing.T) {
			err := tt.spec.Check()
			if errText(err) != tt.wantErr {
				t.Fatalf("got error %q, want %q", errText(err), tt.wantErr)
			}
			if err == nil && tt.spec.String() != tt.want {
				t.Errorf("got %q, want %q", tt.spec.String(), tt.want)
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
