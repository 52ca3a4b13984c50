package host

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evictd/evictd/signals"
)

func stallObs(sig signals.Signal, v int64) signals.Observation {
	return signals.Observation{Signal: sig, Available: v, Capacity: signals.StallScale, Time: now}
}

// localStall is a stall observation not corroborated as the node's, as
// every first reading is (it has no earlier reclaim counts).
func localStall(sig signals.Signal, v int64) signals.Observation {
	o := stallObs(sig, v)
	o.Local = true
	return o
}

func TestMemoryPressureSource(t *testing.T) {
	const v2File = "some avg10=1.00 avg60=2.00 avg300=3.00 total=10\nfull avg10=0.50 avg60=0.25 avg300=0.01 total=5\n"
	// A first reading: no earlier reclaim counts, so every stall is local.
	fromProc := []signals.Observation{
		localStall(signals.MemoryPressureSomeAvg10, 1250), localStall(signals.MemoryPressureSomeAvg60, 402), localStall(signals.MemoryPressureSomeAvg300, 90),
		localStall(signals.MemoryPressureFullAvg10, 825), localStall(signals.MemoryPressureFullAvg60, 200), localStall(signals.MemoryPressureFullAvg300, 31),
	}
	fromV2Root := []signals.Observation{
		localStall(signals.MemoryPressureSomeAvg10, 100), localStall(signals.MemoryPressureSomeAvg60, 200), localStall(signals.MemoryPressureSomeAvg300, 300),
		localStall(signals.MemoryPressureFullAvg10, 50), localStall(signals.MemoryPressureFullAvg60, 25), localStall(signals.MemoryPressureFullAvg300, 1),
	}
	tests := []struct {
		name      string
		cgroup    string
		procEdits map[string]*string
		cgEdits   map[string]*string
		want      []signals.Observation
		wantErr   string
	}{
		{name: "proc, cgroup v1", cgroup: "cgroupv1", want: fromProc},
		{name: "proc wins on cgroup v2", cgroup: "cgroupv2", cgEdits: map[string]*string{"memory.pressure": str(v2File)}, want: fromProc},
		{name: "no /proc/pressure, cgroup v2 root memory.pressure", cgroup: "cgroupv2",
			procEdits: map[string]*string{"pressure": nil}, cgEdits: map[string]*string{"memory.pressure": str(v2File)}, want: fromV2Root},
		{name: "no /proc/pressure, cgroup v1: missing", cgroup: "cgroupv1",
			procEdits: map[string]*string{"pressure": nil}, wantErr: "memory.pressure.*: read "},
		{name: "no PSI anywhere on cgroup v2: missing", cgroup: "cgroupv2",
			procEdits: map[string]*string{"pressure": nil}, wantErr: "memory.pressure: no such file"},
		{name: "garbled", cgroup: "cgroupv1",
			procEdits: map[string]*string{"pressure/memory": str("some avg10=NaN avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")},
			wantErr:   `pressure/memory: some avg10="NaN": not a decimal percentage`},
		{name: "truncated", cgroup: "cgroupv1",
			procEdits: map[string]*string{"pressure/memory": str("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")},
			wantErr:   "pressure/memory: no full line"},
		{name: "empty", cgroup: "cgroupv1",
			procEdits: map[string]*string{"pressure/memory": str("")}, wantErr: "no some line"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			proc := copyFixture(t, "proc")
			edit(t, proc, tc.procEdits)
			cg := copyFixture(t, tc.cgroup)
			edit(t, cg, tc.cgEdits)
			src, err := NewMemoryPressureSource(fixtureConfig(t, proc, cg, DriverCgroupfs))
			if err != nil {
				t.Fatal(err)
			}
			got, err := src.Observe(context.Background(), now)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, %v; want an error holding %q", got, err, tc.wantErr)
				}
				if len(got) != 0 {
					t.Errorf("got observations %v with the error, want none (never a zero)", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("got %+v, want %+v", got[i], tc.want[i])
				}
				if err := got[i].Check(); err != nil {
					t.Errorf("observation fails Check: %v", err)
				}
			}
		})
	}
}

func TestMemoryPressureSourceCanceled(t *testing.T) {
	src, err := NewMemoryPressureSource(fixtureConfig(t, fixture(t, "proc"), fixture(t, "cgroupv1"), DriverCgroupfs))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got, err := src.Observe(ctx, now); err == nil || len(got) != 0 {
		t.Errorf("got %v, %v; want the context's error", got, err)
	}
}

// TestRealMemoryPressure reads this machine's /proc/pressure/memory through
// the source and checks it against the file read directly.
func TestRealMemoryPressure(t *testing.T) {
	const file = "/proc/pressure/memory"
	if _, err := os.Stat(file); err != nil {
		t.Skipf("no PSI on this kernel: %v", err)
	}
	src, err := NewMemoryPressureSource(realConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	got, err := src.Observe(context.Background(), now)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 6 {
		t.Fatalf("got %d observations %v, want 6", len(got), got)
	}
	seen := map[signals.Signal]bool{}
	for _, o := range got {
		if err := o.Check(); err != nil {
			t.Errorf("real observation fails Check: %v", err)
		}
		if !o.Signal.Stall() || o.Time != now {
			t.Errorf("got %+v, want a stall signal at %v", o, now)
		}
		seen[o.Signal] = true
	}
	if len(seen) != 6 {
		t.Errorf("got signals %v, want six different ones", seen)
	}
	// The averages move between two reads, but within 0..100% and, for an
	// idle 300 s average, hardly at all: compare the slow one loosely.
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := parsePSI(filepath.Clean(file), b)
	if err != nil {
		t.Fatalf("parse the real file: %v", err)
	}
	for _, o := range got {
		if o.Signal == signals.MemoryPressureSomeAvg300 || o.Signal == signals.MemoryPressureFullAvg300 {
			if d := o.Available - direct[o.Signal]; d > 100 || d < -100 {
				t.Errorf("%s: source read %d, file %d a moment later", o.Signal, o.Available, direct[o.Signal])
			}
		}
	}
}
