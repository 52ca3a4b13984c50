package thresholds

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/signals"
)

func TestParseStall(t *testing.T) {
	tests := []struct {
		name string
		s    Settings
		want []string
	}{{
		name: "bare number, percent sign and decimals, hard and soft",
		s: Settings{
			Hard: map[string]string{
				"memory.available":            "100Mi",
				"memory.pressure.full.avg10":  ">20",
				"memory.pressure.some.avg60":  ">12.5%",
				"memory.pressure.some.avg300": ">0.01",
				"memory.pressure.full.avg300": ">99.99",
			},
			Soft:            map[string]string{"memory.pressure.full.avg60": ">5.25"},
			SoftGracePeriod: map[string]string{"memory.pressure.full.avg60": "30s"},
		},
		want: []string{
			"memory.available<100Mi hard (--eviction-hard)",
			"memory.pressure.some.avg60>12.5% hard (--eviction-hard)",
			"memory.pressure.some.avg300>0.01% hard (--eviction-hard)",
			"memory.pressure.full.avg10>20% hard (--eviction-hard)",
			"memory.pressure.full.avg60>5.25% soft grace=30s (--eviction-soft)",
			"memory.pressure.full.avg300>99.99% hard (--eviction-hard)",
		},
	}, {
		name: "a stall threshold derives no allocatable threshold",
		s: Settings{
			Hard:                   map[string]string{"memory.pressure.some.avg10": ">40"},
			EnforceNodeAllocatable: []string{"pods"},
		},
		want: []string{"memory.pressure.some.avg10>40% hard (--eviction-hard)"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(tt.s)
			if err != nil {
				t.Fatal(err)
			}
			if got := describe(p.Thresholds); !slices.Equal(got, tt.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			for _, th := range p.Thresholds {
				if th.Signal.Stall() != (th.Operator == GreaterThan) {
					t.Errorf("%s: operator %s on a signal with Stall() %v", th, th.Operator, th.Signal.Stall())
				}
			}
		})
	}
}

func TestParseStallValues(t *testing.T) {
	for in, want := range map[string]int64{
		"20": 2000, "20%": 2000, "20.5": 2050, "20.50%": 2050, "0.01": 1, "99.99": 9999, "007": 700, "1.2": 120,
	} {
		p, err := Parse(Settings{Hard: map[string]string{"memory.pressure.full.avg10": ">" + in}})
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if got := Quantity(p.Thresholds[0].Value, signals.StallScale); got != want {
			t.Errorf("%s: got %d, want %d", in, got, want)
		}
	}
}

func TestParseStallErrors(t *testing.T) {
	const want = "the stall threshold must be a percentage of time above 0 and below 100, such as 20 or 12.5%, with at most two decimals"
	hard := func(sig, val string) Settings { return Settings{Hard: map[string]string{sig: val}} }
	tests := []struct {
		name string
		s    Settings
		want string
	}{
		{"stall signal with <", hard("memory.pressure.full.avg10", "20"),
			`--eviction-hard: memory.pressure.full.avg10<20: a memory pressure stall signal takes ">" (memory.pressure.full.avg10>20): the node is under pressure while the stall is above the value`},
		{"stall signal with < in eviction-soft", Settings{Soft: map[string]string{"memory.pressure.some.avg60": "20%"}, SoftSource: "config evictionSoft"},
			`config evictionSoft: memory.pressure.some.avg60<20%: a memory pressure stall signal takes ">"`},
		{"> on memory.available", hard("memory.available", ">100Mi"),
			`--eviction-hard: memory.available>100Mi: only the memory.pressure.* stall signals take ">"; memory.available takes "<" (memory.available<100Mi)`},
		{"> on nodefs.available", Settings{Soft: map[string]string{"nodefs.available": ">10%"}},
			`--eviction-soft: nodefs.available>10%: only the memory.pressure.* stall signals take ">"`},
		{"zero", hard("memory.pressure.full.avg10", ">0"), "--eviction-hard: memory.pressure.full.avg10>0: " + want},
		{"zero with decimals", hard("memory.pressure.full.avg10", ">0.00%"), "memory.pressure.full.avg10>0.00%: " + want},
		{"100", hard("memory.pressure.full.avg10", ">100"), "memory.pressure.full.avg10>100: " + want},
		{"above 100", hard("memory.pressure.full.avg10", ">250%"), "memory.pressure.full.avg10>250%: " + want},
		{"huge", hard("memory.pressure.full.avg10", ">99999999999999999999999"), want},
		{"negative", hard("memory.pressure.full.avg10", ">-5"), "memory.pressure.full.avg10>-5: " + want},
		{"NaN", hard("memory.pressure.full.avg10", ">NaN"), "memory.pressure.full.avg10>NaN: " + want},
		{"Inf", hard("memory.pressure.full.avg10", ">+Inf%"), "memory.pressure.full.avg10>+Inf%: " + want},
		{"exponent", hard("memory.pressure.full.avg10", ">2e1"), want},
		{"three decimals", hard("memory.pressure.full.avg10", ">12.345"), want},
		{"a quantity", hard("memory.pressure.full.avg10", ">100Mi"), want},
		{"empty after >", hard("memory.pressure.full.avg10", ">"), "memory.pressure.full.avg10>: " + want},
		{"two percent signs", hard("memory.pressure.full.avg10", ">20%%"), want},
		{"two operators", hard("memory.pressure.full.avg10", ">>20"), want},
		{"space", hard("memory.pressure.full.avg10", "> 20"), want},
		{"unknown window", hard("memory.pressure.full.avg30", ">20"), "--eviction-hard: unsupported eviction signal memory.pressure.full.avg30"},
		{"minimum reclaim", Settings{Hard: map[string]string{"memory.pressure.full.avg10": ">20"}, MinimumReclaim: map[string]string{"memory.pressure.full.avg10": "5"}},
			"--eviction-minimum-reclaim: memory.pressure.full.avg10=5: minimum reclaim does not apply to a memory pressure stall signal (evicting a pod frees memory, not a share of stalled time); remove it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(tt.s)
			if err == nil {
				t.Fatalf("got %v, want an error holding %q", describe(p.Thresholds), tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got  %q\nwant %q", err, tt.want)
			}
		})
	}
}

func TestParseStallGracePeriodRequired(t *testing.T) {
	_, err := Parse(Settings{Soft: map[string]string{"memory.pressure.full.avg10": ">20"}})
	const want = "--eviction-soft: grace period must be specified for the soft eviction threshold memory.pressure.full.avg10"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
}

func stallTh(sig signals.Signal, bp int64) Threshold {
	p, err := Parse(Settings{Hard: map[string]string{string(sig): ">" + signals.FormatStall(bp)}})
	if err != nil {
		panic(err)
	}
	return p.Thresholds[0]
}

func TestMetStall(t *testing.T) {
	full10 := stallTh(signals.MemoryPressureFullAvg10, 2050) // >20.5%
	some60 := stallTh(signals.MemoryPressureSomeAvg60, 1)    // >0.01%
	mem := Threshold{Signal: signals.MemoryAvailable, Value: Value{Quantity: qty("100")}}
	ths := []Threshold{mem, full10, some60}
	stall := func(sig signals.Signal, v int64) signals.Observation {
		return obsOf(sig, v, signals.StallScale, t0)
	}
	tests := []struct {
		name    string
		obs     signals.Observations
		enforce bool
		want    []signals.Signal
	}{
		{"stall equal to the threshold is not met", signals.Observations{
			signals.MemoryPressureFullAvg10: stall(signals.MemoryPressureFullAvg10, 2050),
			signals.MemoryPressureSomeAvg60: stall(signals.MemoryPressureSomeAvg60, 1),
		}, false, nil},
		{"one hundredth of a percent above is met", signals.Observations{
			signals.MemoryPressureFullAvg10: stall(signals.MemoryPressureFullAvg10, 2051),
			signals.MemoryPressureSomeAvg60: stall(signals.MemoryPressureSomeAvg60, 2),
		}, false, []signals.Signal{signals.MemoryPressureFullAvg10, signals.MemoryPressureSomeAvg60}},
		{"no stall, not met", signals.Observations{
			signals.MemoryPressureFullAvg10: stall(signals.MemoryPressureFullAvg10, 0),
		}, false, nil},
		{"full stall is met, with or without minimum reclaim enforced", signals.Observations{
			signals.MemoryPressureFullAvg10: stall(signals.MemoryPressureFullAvg10, signals.StallScale),
		}, true, []signals.Signal{signals.MemoryPressureFullAvg10}},
		{"plenty of memory available does not hide a stall", signals.Observations{
			signals.MemoryAvailable:         obsOf(signals.MemoryAvailable, 900, 1000, t0),
			signals.MemoryPressureFullAvg10: stall(signals.MemoryPressureFullAvg10, 5000),
		}, false, []signals.Signal{signals.MemoryPressureFullAvg10}},
		{"both kinds met, memory.available first", signals.Observations{
			signals.MemoryAvailable:         obsOf(signals.MemoryAvailable, 10, 1000, t0),
			signals.MemoryPressureFullAvg10: stall(signals.MemoryPressureFullAvg10, 5000),
		}, false, []signals.Signal{signals.MemoryAvailable, signals.MemoryPressureFullAvg10}},
		{"another window's stall does not count", signals.Observations{
			signals.MemoryPressureFullAvg60: stall(signals.MemoryPressureFullAvg60, 9000),
		}, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []signals.Signal
			for _, th := range Met(ths, tt.obs, tt.enforce) {
				got = append(got, th.Signal)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStallThresholdGraceAndTransition(t *testing.T) {
	p, err := Parse(Settings{
		Hard:            map[string]string{},
		Soft:            map[string]string{"memory.pressure.full.avg10": ">20"},
		SoftGracePeriod: map[string]string{"memory.pressure.full.avg10": "30s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	tr := NewTracker(time.Minute, 0)
	at := func(d time.Duration, v int64) Evaluation {
		o := obsOf(signals.MemoryPressureFullAvg10, v, signals.StallScale, t0.Add(d))
		return tr.Evaluate(t0.Add(d), p.Thresholds, signals.Observations{o.Signal: o})
	}
	if ev := at(0, 3000); len(ev.Waiting) != 1 || len(ev.Actionable) != 0 || !ev.Pressure[signals.MemoryPressure].Active {
		t.Errorf("at 0s: got waiting %v actionable %v memory pressure %v, want waiting, memory pressure", ev.Waiting, ev.Actionable, ev.Pressure[signals.MemoryPressure].Active)
	}
	if ev := at(31*time.Second, 3000); len(ev.Actionable) != 1 {
		t.Errorf("at 31s: got actionable %v, want the stall threshold", ev.Actionable)
	}
	if ev := at(40*time.Second, 100); len(ev.Met) != 0 || !ev.Pressure[signals.MemoryPressure].Active {
		t.Errorf("at 40s: got met %v, pressure %v; want none met, pressure held for the transition period", ev.Met, ev.Pressure[signals.MemoryPressure].Active)
	}
}

func TestFormatStall(t *testing.T) {
	for _, tt := range []struct {
		bp   int64
		want string
	}{{2000, "memory.pressure.full.avg10>20%"}, {2050, "memory.pressure.full.avg10>20.5%"}, {1, "memory.pressure.full.avg10>0.01%"}, {9999, "memory.pressure.full.avg10>99.99%"}} {
		th := stallTh(signals.MemoryPressureFullAvg10, tt.bp)
		if got := Format(th); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
		// What Format prints, Parse reads back.
		if again := stallTh(signals.MemoryPressureFullAvg10, Quantity(th.Value, signals.StallScale)); Format(again) != tt.want {
			t.Errorf("round trip: got %q, want %q", Format(again), tt.want)
		}
	}
}

// Stall is not shortage: a stall threshold is met only on a stall
// corroborated as the node's; a Local one (cgroups held at their own
// limits) is set aside, whatever its value, and reported as Local.
func TestMetStallLocal(t *testing.T) {
	some10 := stallTh(signals.MemoryPressureSomeAvg10, 500) // >5%
	full60 := stallTh(signals.MemoryPressureFullAvg60, 2000)
	mem := Threshold{Signal: signals.MemoryAvailable, Value: Value{Quantity: qty("100")}}
	ths := []Threshold{mem, some10, full60}
	stall := func(sig signals.Signal, v int64, local bool) signals.Observation {
		o := obsOf(sig, v, signals.StallScale, t0)
		o.Local = local
		return o
	}
	tests := []struct {
		name      string
		obs       signals.Observations
		want      []signals.Signal
		wantLocal []signals.Signal
	}{
		{"corroborated stall above: met", signals.Observations{
			signals.MemoryPressureSomeAvg10: stall(signals.MemoryPressureSomeAvg10, 9000, false),
		}, []signals.Signal{signals.MemoryPressureSomeAvg10}, nil},
		{"local stall above: not met, set aside", signals.Observations{
			signals.MemoryPressureSomeAvg10: stall(signals.MemoryPressureSomeAvg10, 9000, true),
		}, nil, []signals.Signal{signals.MemoryPressureSomeAvg10}},
		{"full stall, local: not met", signals.Observations{
			signals.MemoryPressureSomeAvg10: stall(signals.MemoryPressureSomeAvg10, signals.StallScale, true),
			signals.MemoryPressureFullAvg60: stall(signals.MemoryPressureFullAvg60, signals.StallScale, true),
		}, nil, []signals.Signal{signals.MemoryPressureSomeAvg10, signals.MemoryPressureFullAvg60}},
		{"local stall below: not met, not set aside", signals.Observations{
			signals.MemoryPressureSomeAvg10: stall(signals.MemoryPressureSomeAvg10, 499, true),
		}, nil, nil},
		{"each window on its own observation", signals.Observations{
			signals.MemoryPressureSomeAvg10: stall(signals.MemoryPressureSomeAvg10, 900, true),
			signals.MemoryPressureFullAvg60: stall(signals.MemoryPressureFullAvg60, 2500, false),
		}, []signals.Signal{signals.MemoryPressureFullAvg60}, []signals.Signal{signals.MemoryPressureSomeAvg10}},
		{"a local stall does not hide a shortage by quantity", signals.Observations{
			signals.MemoryAvailable:         obsOf(signals.MemoryAvailable, 10, 1000, t0),
			signals.MemoryPressureSomeAvg10: stall(signals.MemoryPressureSomeAvg10, 9000, true),
		}, []signals.Signal{signals.MemoryAvailable}, []signals.Signal{signals.MemoryPressureSomeAvg10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []signals.Signal
			for _, th := range Met(ths, tt.obs, false) {
				got = append(got, th.Signal)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Met: got %v, want %v", got, tt.want)
			}
			got = nil
			for _, th := range Met(ths, tt.obs, true) {
				got = append(got, th.Signal)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Met with minimum reclaim: got %v, want %v", got, tt.want)
			}
			ev := NewTracker(time.Minute, 0).Evaluate(t0, ths, tt.obs)
			got = nil
			for _, th := range ev.Met {
				got = append(got, th.Signal)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Evaluate: met %v, want %v", got, tt.want)
			}
			var local []signals.Signal
			for _, th := range ev.Local {
				local = append(local, th.Signal)
			}
			if !slices.Equal(local, tt.wantLocal) {
				t.Errorf("Evaluate: local %v, want %v", local, tt.wantLocal)
			}
			if wantPressure := len(tt.want) > 0; ev.Pressure[signals.MemoryPressure].Active != wantPressure {
				t.Errorf("memory pressure %v, want %v", ev.Pressure[signals.MemoryPressure].Active, wantPressure)
			}
		})
	}
}

// A soft stall threshold waits out its grace period only while the stall
// is the node's: a pass where it is local restarts the grace period, and
// sets no pressure of its own.
func TestStallLocalRestartsGrace(t *testing.T) {
	p, err := Parse(Settings{
		Hard:            map[string]string{},
		Soft:            map[string]string{"memory.pressure.some.avg60": ">10"},
		SoftGracePeriod: map[string]string{"memory.pressure.some.avg60": "30s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	tr := NewTracker(0, 0)
	at := func(d time.Duration, local bool) Evaluation {
		o := obsOf(signals.MemoryPressureSomeAvg60, 4000, signals.StallScale, t0.Add(d))
		o.Local = local
		return tr.Evaluate(t0.Add(d), p.Thresholds, signals.Observations{o.Signal: o})
	}
	if ev := at(0, false); len(ev.Waiting) != 1 {
		t.Fatalf("+0s: waiting %v, want the threshold", ev.Waiting)
	}
	if ev := at(20*time.Second, true); len(ev.Met) != 0 || len(ev.Local) != 1 || ev.Pressure[signals.MemoryPressure].Active {
		t.Errorf("+20s, local: met %v, local %v, pressure %v; want set aside, no pressure", ev.Met, ev.Local, ev.Pressure[signals.MemoryPressure].Active)
	}
	if ev := at(35*time.Second, false); len(ev.Actionable) != 0 || len(ev.Waiting) != 1 || !ev.FirstObservedAt[p.Thresholds[0].Key()].Equal(t0.Add(35*time.Second)) {
		t.Errorf("+35s: actionable %v, waiting %v since %v; want the grace period restarted at +35s", ev.Actionable, ev.Waiting, ev.FirstObservedAt)
	}
	if ev := at(70*time.Second, false); len(ev.Actionable) != 1 {
		t.Errorf("+70s: actionable %v, want the threshold", ev.Actionable)
	}
}
