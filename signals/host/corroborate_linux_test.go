package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/signals"
)

// vmstat is a /proc/vmstat with the two scan counts the rule reads, and the
// khugepaged one that it does not.
func vmstat(kswapd, direct int64) string {
	return fmt.Sprintf("nr_free_pages 1778721\npgsteal_kswapd 51200\npgscan_kswapd %d\npgscan_direct %d\npgscan_khugepaged 999\npgscan_direct_throttle 0\n", kswapd, direct)
}

// eventsLocal is a cgroup v2 memory.events.local.
func eventsLocal(high, max int64) string {
	return fmt.Sprintf("low 0\nhigh %d\nmax %d\noom 0\noom_kill 0\noom_group_kill 0\n", high, max)
}

// TestStallCorroboration reads a node twice, 10 s apart, through
// MemoryPressureSource, changing its files in between: the stall is the
// node's only when the node's reclaim scans or kubepods' own limit events
// rose over the window.
func TestStallCorroboration(t *testing.T) {
	const (
		v2Events   = "kubepods/memory.events.local"
		v2SdEvents = "kubepods.slice/memory.events.local"
		v1Failcnt  = "memory/kubepods/memory.failcnt"
	)
	type files struct{ proc, cg map[string]*string }
	tests := []struct {
		name          string
		cgroup        string
		driver        string
		first, second files
		// wantLocal is the second reading's avg10 stall.
		wantLocal bool
	}{
		{name: "v2: nothing rose: local", cgroup: "cgroupv2",
			first:     files{map[string]*string{"vmstat": str(vmstat(100, 5))}, map[string]*string{v2Events: str(eventsLocal(0, 0))}},
			second:    files{map[string]*string{"vmstat": str(vmstat(100, 5))}, map[string]*string{v2Events: str(eventsLocal(0, 0))}},
			wantLocal: true},
		{name: "v2: kswapd scanned: the node's", cgroup: "cgroupv2",
			first:     files{map[string]*string{"vmstat": str(vmstat(100, 5))}, nil},
			second:    files{map[string]*string{"vmstat": str(vmstat(164, 5))}, nil},
			wantLocal: false},
		{name: "v2: direct reclaim scanned: the node's", cgroup: "cgroupv2",
			first:     files{map[string]*string{"vmstat": str(vmstat(100, 5))}, nil},
			second:    files{map[string]*string{"vmstat": str(vmstat(100, 37))}, nil},
			wantLocal: false},
		{name: "v2: khugepaged's scans are not the rule's", cgroup: "cgroupv2",
			first:     files{map[string]*string{"vmstat": str(vmstat(100, 5))}, nil},
			second:    files{map[string]*string{"vmstat": str(strings.Replace(vmstat(100, 5), "pgscan_khugepaged 999", "pgscan_khugepaged 5000", 1))}, nil},
			wantLocal: true},
		{name: "v2: kubepods reached its memory.max: the node's", cgroup: "cgroupv2",
			first:     files{nil, map[string]*string{v2Events: str(eventsLocal(0, 3))}},
			second:    files{nil, map[string]*string{v2Events: str(eventsLocal(0, 4))}},
			wantLocal: false},
		{name: "v2: kubepods over its own memory.high: the node's", cgroup: "cgroupv2",
			first:     files{nil, map[string]*string{v2Events: str(eventsLocal(7, 0))}},
			second:    files{nil, map[string]*string{v2Events: str(eventsLocal(9, 0))}},
			wantLocal: false},
		{name: "v2: kubepods made again, events since: the node's", cgroup: "cgroupv2",
			first:     files{nil, map[string]*string{v2Events: str(eventsLocal(50, 50))}},
			second:    files{nil, map[string]*string{v2Events: str(eventsLocal(0, 1))}},
			wantLocal: false},
		{name: "v2: kubepods made again, no event since: local", cgroup: "cgroupv2",
			first:     files{nil, map[string]*string{v2Events: str(eventsLocal(50, 50))}},
			second:    files{nil, map[string]*string{v2Events: str(eventsLocal(0, 0))}},
			wantLocal: true},
		{name: "v2: no kubepods, then kubepods with a max event: the node's", cgroup: "cgroupv2",
			first:     files{nil, map[string]*string{"kubepods": nil}},
			second:    files{nil, map[string]*string{v2Events: str(eventsLocal(0, 1))}},
			wantLocal: false},
		{name: "v2: no kubepods at all: local (no error)", cgroup: "cgroupv2",
			first:     files{nil, map[string]*string{"kubepods": nil}},
			second:    files{nil, map[string]*string{"kubepods": nil}},
			wantLocal: true},
		{name: "v2 systemd driver: kubepods.slice reached its memory.max", cgroup: "cgroupv2-systemd", driver: DriverSystemd,
			first:     files{nil, map[string]*string{v2SdEvents: str(eventsLocal(0, 0))}},
			second:    files{nil, map[string]*string{v2SdEvents: str(eventsLocal(0, 2))}},
			wantLocal: false},
		{name: "v1: kubepods failcnt rose: the node's", cgroup: "cgroupv1",
			first:     files{nil, map[string]*string{v1Failcnt: str("12\n")}},
			second:    files{nil, map[string]*string{v1Failcnt: str("13\n")}},
			wantLocal: false},
		{name: "v1: nothing rose: local", cgroup: "cgroupv1",
			first:     files{nil, map[string]*string{v1Failcnt: str("12\n")}},
			second:    files{nil, map[string]*string{v1Failcnt: str("12\n")}},
			wantLocal: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			proc, cg := copyFixture(t, "proc"), copyFixture(t, tc.cgroup)
			driver := tc.driver
			if driver == "" {
				driver = DriverCgroupfs
			}
			src, err := NewMemoryPressureSource(fixtureConfig(t, proc, cg, driver))
			if err != nil {
				t.Fatal(err)
			}
			edit(t, proc, tc.first.proc)
			edit(t, cg, tc.first.cg)
			first, err := src.Observe(context.Background(), now)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range first {
				if !o.Local {
					t.Errorf("first reading: %s not local, want local (no earlier counts)", o.Signal)
				}
			}
			edit(t, proc, tc.second.proc)
			for rel, content := range tc.second.cg {
				if content != nil { // kubepods made again
					if err := os.MkdirAll(filepath.Dir(filepath.Join(cg, rel)), 0o755); err != nil {
						t.Fatal(err)
					}
				}
			}
			edit(t, cg, tc.second.cg)
			second, err := src.Observe(context.Background(), now.Add(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if len(second) != 6 {
				t.Fatalf("got %d observations, want 6", len(second))
			}
			for _, o := range second {
				if o.Local != tc.wantLocal {
					t.Errorf("%s: local %v, want %v", o.Signal, o.Local, tc.wantLocal)
				}
				if err := o.Check(); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// TestStallCorroborationWindows follows one node for six minutes: the
// node's reclaim at one moment corroborates each average for as long as
// its window covers that moment.
func TestStallCorroborationWindows(t *testing.T) {
	proc, cg := copyFixture(t, "proc"), copyFixture(t, "cgroupv2")
	src, err := NewMemoryPressureSource(fixtureConfig(t, proc, cg, DriverCgroupfs))
	if err != nil {
		t.Fatal(err)
	}
	scan := int64(100)
	local := func(at time.Duration) map[signals.Signal]bool {
		t.Helper()
		edit(t, proc, map[string]*string{"vmstat": str(vmstat(scan, 0))})
		got, err := src.Observe(context.Background(), now.Add(at))
		if err != nil {
			t.Fatal(err)
		}
		m := map[signals.Signal]bool{}
		for _, o := range got {
			m[o.Signal] = o.Local
		}
		return m
	}
	// Passes every 10 s; the node reclaims once, between +30s and +40s.
	for at := time.Duration(0); at <= 360*time.Second; at += 10 * time.Second {
		if at == 40*time.Second {
			scan += 500
		}
		got := local(at)
		for _, sig := range []signals.Signal{signals.MemoryPressureSomeAvg10, signals.MemoryPressureSomeAvg60, signals.MemoryPressureFullAvg300} {
			w := sig.StallWindow()
			// The reclaim is seen by the readings from +40s for as long
			// as the reading opening their window is from +30s or before.
			want := !(at >= 40*time.Second && at-w <= 30*time.Second)
			if got[sig] != want {
				t.Errorf("+%s %s: local %v, want %v", at, sig, got[sig], want)
			}
		}
	}
}

// TestStallCorroborationErrors: a corroborating file that cannot be read or
// parsed is an error for all six stall signals, naming the file and the
// value, never a stall taken as the node's.
func TestStallCorroborationErrors(t *testing.T) {
	tests := []struct {
		name, cgroup   string
		proc, cgEdits  map[string]*string
		wantErrHolding string
	}{
		{"no vmstat", "cgroupv2", map[string]*string{"vmstat": nil}, nil, "vmstat: no such file"},
		{"vmstat without pgscan_direct", "cgroupv2", map[string]*string{"vmstat": str("pgscan_kswapd 5\n")}, nil, "vmstat: no pgscan_direct line"},
		{"garbled vmstat value", "cgroupv2", map[string]*string{"vmstat": str("pgscan_kswapd 5x\npgscan_direct 0\n")}, nil, `vmstat: strconv.ParseInt: parsing "5x"`},
		{"negative vmstat value", "cgroupv2", map[string]*string{"vmstat": str("pgscan_kswapd -5\npgscan_direct 0\n")}, nil, `vmstat: value "-5" is negative`},
		{"vmstat line of three fields", "cgroupv2", map[string]*string{"vmstat": str("pgscan_kswapd 5 6\npgscan_direct 0\n")}, nil, `line 1 "pgscan_kswapd 5 6" is not "key value"`},
		{"vmstat sum overflows", "cgroupv2", map[string]*string{"vmstat": str("pgscan_kswapd 9223372036854775807\npgscan_direct 1\n")}, nil, "pgscan_kswapd + pgscan_direct"},
		{"no memory.events.local in kubepods", "cgroupv2", nil, map[string]*string{"kubepods/memory.events.local": nil}, "kubepods/memory.events.local: no such file"},
		{"memory.events.local without max", "cgroupv2", nil, map[string]*string{"kubepods/memory.events.local": str("low 0\nhigh 0\n")}, "memory.events.local: no max line"},
		{"garbled memory.events.local", "cgroupv2", nil, map[string]*string{"kubepods/memory.events.local": str("low 0\nhigh x\nmax 0\n")}, `memory.events.local: strconv.ParseInt: parsing "x"`},
		{"memory.events.local key twice", "cgroupv2", nil, map[string]*string{"kubepods/memory.events.local": str("high 0\nmax 0\nmax 1\n")}, "key max given twice"},
		{"no memory.failcnt in v1 kubepods", "cgroupv1", nil, map[string]*string{"memory/kubepods/memory.failcnt": nil}, "memory.failcnt: no such file"},
		{"garbled memory.failcnt", "cgroupv1", nil, map[string]*string{"memory/kubepods/memory.failcnt": str("lots\n")}, `memory.failcnt: strconv.ParseInt: parsing "lots"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			proc, cg := copyFixture(t, "proc"), copyFixture(t, tc.cgroup)
			edit(t, proc, tc.proc)
			edit(t, cg, tc.cgEdits)
			src, err := NewMemoryPressureSource(fixtureConfig(t, proc, cg, DriverCgroupfs))
			if err != nil {
				t.Fatal(err)
			}
			got, err := src.Observe(context.Background(), now)
			if err == nil || !strings.Contains(err.Error(), tc.wantErrHolding) || !strings.HasPrefix(err.Error(), "memory.pressure.*: ") {
				t.Fatalf("got %v, %v; want an error for memory.pressure.* holding %q", got, err, tc.wantErrHolding)
			}
			if len(got) != 0 {
				t.Errorf("got observations %v with the error, want none", got)
			}
		})
	}
}

// TestStallHistoryClockStep: readings taken after a reading's time (the
// clock stepped back) cannot open its window and are forgotten; the history
// stays bounded.
func TestStallHistoryClockStep(t *testing.T) {
	var h stallHistory
	at := func(d time.Duration, scan int64) reclaimCounts {
		return reclaimCounts{at: now.Add(d), nodeScan: scan, known: true}
	}
	h.add(at(0, 1))
	h.add(at(10*time.Second, 2))
	h.add(at(20*time.Second, 3))
	// The clock steps back to +5s: only the reading at 0 can open a window.
	if local, why := h.local(10*time.Second, at(5*time.Second, 1)); !local {
		t.Errorf("after the step: not local (%s), want local: the node's count did not rise since +0s", why)
	}
	h.add(at(5*time.Second, 1))
	if len(h.readings) != 2 {
		t.Errorf("after the step: %d readings, want 2 (0s and 5s)", len(h.readings))
	}
	for i := 0; i < 3*maxReadings; i++ {
		h.add(at(5*time.Second+time.Duration(i)*time.Millisecond, 1))
	}
	if len(h.readings) > maxReadings {
		t.Errorf("%d readings kept, want at most %d", len(h.readings), maxReadings)
	}
	// Readings older than the longest window's opening are dropped.
	var g stallHistory
	for s := 0; s <= 900; s += 10 {
		g.add(at(time.Duration(s)*time.Second, int64(s)))
	}
	if first := g.readings[0].at; first.Before(now.Add(900*time.Second - maxStallWindow)) {
		t.Errorf("oldest reading at %s, want none before %s", first.Sub(now), 900*time.Second-maxStallWindow)
	}
}
