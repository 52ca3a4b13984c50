package thresholds

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/signals"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func qty(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

func pct(p float32) Value { return Value{Percentage: p} }

func TestQuantity(t *testing.T) {
	nan := float32(0)
	nan /= nan
	tests := []struct {
		name     string
		v        Value
		capacity int64
		want     int64
	}{
		{"absolute ignores capacity", Value{Quantity: qty("100Mi")}, 1, 100 << 20},
		{"decimal suffix", Value{Quantity: qty("1G")}, 0, 1e9},
		{"fractions round up as Quantity.Value does", Value{Quantity: qty("0.5")}, 0, 1},
		{"beyond int64 saturates", Value{Quantity: qty("1e400")}, 0, maxInt64},
		{"below int64 saturates", Value{Quantity: qty("-1e400")}, 0, minInt64},
		{"10% of 1000", pct(float32(10) / 100), 1000, 100},
		{"15% of 100 truncates float noise", pct(float32(15) / 100), 100, 15},
		// float32(0.075) is 0.07500000298…, and the kubelet multiplies by it too.
		{"7.5% of 1Gi carries float32 error", pct(float32(7.5) / 100), 1 << 30, 80530640},
		{"100% is the capacity", pct(1), 12345, 12345},
		{"zero capacity", pct(0.5), 0, 0},
		{"huge percentage saturates", pct(1e30), 1 << 40, maxInt64},
		{"huge negative percentage saturates", pct(-1e30), 1 << 40, minInt64},
		{"NaN counts as 0", Value{Percentage: nan}, 1000, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Quantity(tt.v, tt.capacity); got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}

func obsOf(sig signals.Signal, available, capacity int64, at time.Time) signals.Observation {
	return signals.Observation{Signal: sig, Available: available, Capacity: capacity, Time: at}
}

func TestMet(t *testing.T) {
	mem := Threshold{Signal: signals.MemoryAvailable, Value: Value{Quantity: qty("100")}, MinReclaim: &Value{Quantity: qty("50")}}
	nodefs := Threshold{Signal: signals.NodeFsAvailable, Value: pct(0.1), MinReclaim: &Value{Percentage: 0.05}}
	pid := Threshold{Signal: signals.PIDAvailable, Value: Value{Quantity: qty("100")}}
	huge := Threshold{Signal: signals.ImageFsAvailable, Value: Value{Quantity: qty("9223372036854775807")}, MinReclaim: &Value{Quantity: qty("1")}}
	ths := []Threshold{mem, nodefs, pid, huge}
	tests := []struct {
		name    string
		obs     signals.Observations
		enforce bool
		want    []signals.Signal
	}{
		{"available equal to the threshold is not met", signals.Observations{
			signals.MemoryAvailable: obsOf(signals.MemoryAvailable, 100, 1000, t0),
			signals.NodeFsAvailable: obsOf(signals.NodeFsAvailable, 100, 1000, t0),
		}, false, nil},
		{"one below the threshold is met", signals.Observations{
			signals.MemoryAvailable: obsOf(signals.MemoryAvailable, 99, 1000, t0),
			signals.NodeFsAvailable: obsOf(signals.NodeFsAvailable, 99, 1000, t0),
		}, false, []signals.Signal{signals.MemoryAvailable, signals.NodeFsAvailable}},
		{"percentages scale with capacity", signals.Observations{
			signals.NodeFsAvailable: obsOf(signals.NodeFsAvailable, 150, 2000, t0),
		}, false, []signals.Signal{signals.NodeFsAvailable}},
		{"minimum reclaim raises the bar", signals.Observations{
			signals.MemoryAvailable: obsOf(signals.MemoryAvailable, 149, 1000, t0),
			signals.NodeFsAvailable: obsOf(signals.NodeFsAvailable, 150, 1000, t0),
		}, true, []signals.Signal{signals.MemoryAvailable}},
		{"minimum reclaim is ignored unless enforced", signals.Observations{
			signals.MemoryAvailable: obsOf(signals.MemoryAvailable, 149, 1000, t0),
		}, false, nil},
		{"a threshold without minimum reclaim is unchanged by enforcing it", signals.Observations{
			signals.PIDAvailable: obsOf(signals.PIDAvailable, 100, 1000, t0),
		}, true, nil},
		{"threshold plus minimum reclaim does not wrap around", signals.Observations{
			signals.ImageFsAvailable: obsOf(signals.ImageFsAvailable, 1<<62, 1<<62, t0),
		}, true, []signals.Signal{signals.ImageFsAvailable}},
		{"no observation, not met", signals.Observations{}, false, nil},
		{"nil observations, not met", nil, true, nil},
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

func TestHeadroom(t *testing.T) {
	mem := Threshold{Signal: signals.MemoryAvailable, Value: Value{Quantity: qty("100")}}
	tenPct := Threshold{Signal: signals.AllocatableMemoryAvailable, Value: pct(0.1)}
	huge := Threshold{Signal: signals.MemoryAvailable, Value: Value{Quantity: qty("1e400")}}
	negative := Threshold{Signal: signals.MemoryAvailable, Value: Value{Quantity: qty("-1e400")}}
	full10 := stallTh(signals.MemoryPressureFullAvg10, 2050) // >20.5%
	tests := []struct {
		name                string
		th                  Threshold
		available, capacity int64
		want                int64
	}{
		{"above the threshold", mem, 150, 1000, 50},
		{"at the threshold, not met", mem, 100, 1000, 0},
		{"one below, met", mem, 99, 1000, -1},
		{"nothing available", mem, 0, 1000, -100},
		{"a percentage of the capacity", tenPct, 150, 1000, 50},
		{"the same percentage of another capacity", tenPct, 150, 2000, -50},
		{"stall below the threshold", full10, 2000, signals.StallScale, 50},
		{"stall at the threshold, not met", full10, 2050, signals.StallScale, 0},
		{"stall above the threshold, met", full10, 2051, signals.StallScale, -1},
		{"a saturated threshold does not wrap", huge, -2, 1000, minInt64},
		{"a saturated negative threshold does not wrap", negative, maxInt64, 1000, maxInt64},
		{"exactly the int64 range", huge, 0, 1000, -maxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := obsOf(tt.th.Signal, tt.available, tt.capacity, t0)
			got := Headroom(tt.th, o)
			if got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
			met := len(Met([]Threshold{tt.th}, signals.Observations{o.Signal: o}, false)) == 1
			if met != (got < 0) {
				t.Errorf("Met says met %v, but the headroom is %d", met, got)
			}
		})
	}
}

func TestSortByPriority(t *testing.T) {
	ths := []Threshold{
		{Signal: signals.PIDAvailable},
		{Signal: signals.NodeFsInodesFree, Soft: true},
		{Signal: "zzz.unknown"},
		{Signal: signals.ContainerFsAvailable},
		{Signal: signals.NodeFsAvailable, Soft: true},
		{Signal: "aaa.unknown"},
		{Signal: signals.NodeFsAvailable},
		{Signal: signals.AllocatableMemoryAvailable},
		{Signal: signals.MemoryAvailable, Soft: true},
		{Signal: signals.ImageFsAvailable},
		{Signal: signals.MemoryAvailable},
	}
	SortByPriority(ths)
	var got []string
	for _, th := range ths {
		s := string(th.Signal)
		if th.Soft {
			s += "/soft"
		}
		got = append(got, s)
	}
	want := []string{
		"memory.available", "memory.available/soft", "allocatableMemory.available",
		"nodefs.available", "nodefs.available/soft", "nodefs.inodesFree/soft",
		"imagefs.available", "containerfs.available", "pid.available",
		"aaa.unknown", "zzz.unknown",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestFormat(t *testing.T) {
	nan := float32(0)
	nan /= nan
	tests := []struct {
		th   Threshold
		want string
	}{
		{Threshold{Signal: signals.MemoryAvailable, Value: Value{Quantity: qty("100Mi")}}, "memory.available<100Mi"},
		{Threshold{Signal: signals.NodeFsAvailable, Value: pct(float32(10) / 100)}, "nodefs.available<10%"},
		{Threshold{Signal: signals.NodeFsAvailable, Value: pct(float32(15) / 100)}, "nodefs.available<15%"},
		{Threshold{Signal: signals.NodeFsAvailable, Value: pct(float32(7.5) / 100)}, "nodefs.available<7.5%"},
		{Threshold{Signal: signals.NodeFsAvailable, Value: pct(float32(0.001) / 100)}, "nodefs.available<0.001%"},
		{Threshold{Signal: signals.NodeFsAvailable, Value: pct(float32(33.333) / 100)}, "nodefs.available<33.333%"},
		{Threshold{Signal: signals.NodeFsAvailable, Value: pct(1)}, "nodefs.available<100.0%"},
		{Threshold{Signal: signals.NodeFsAvailable, Value: pct(0)}, "nodefs.available<0.0%"},
		{Threshold{Signal: signals.NodeFsAvailable, Value: pct(2.5)}, "nodefs.available<250%"},
		{Threshold{Signal: signals.NodeFsAvailable, Value: Value{Percentage: nan}}, "nodefs.available<NaN%"},
		{Threshold{Signal: signals.PIDAvailable, Value: Value{Quantity: qty("1k")}}, "pid.available<1k"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := Format(tt.th); got != tt.want {
				t.Errorf("Format: got %q, want %q", got, tt.want)
			}
			if got := tt.th.String(); got != tt.want {
				t.Errorf("String: got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFormatRoundTrips(t *testing.T) {
	// What Format prints, Parse reads back as the same value.
	for _, v := range []string{"1%", "5%", "7.5%", "10%", "12.34%", "15%", "33.3333%", "0.0001%", "99.99%", "1e-3%", "100Mi", "1.5Gi", "2G", "750m"} {
		th := parseOne(t, signals.NodeFsAvailable, v)
		again := parseOne(t, signals.NodeFsAvailable, strings.TrimPrefix(Format(th), "nodefs.available<"))
		if th.Value.Percentage != again.Value.Percentage || Quantity(th.Value, 1<<40) != Quantity(again.Value, 1<<40) {
			t.Errorf("%s: got %s back as %+v, want %+v", v, Format(th), again.Value, th.Value)
		}
	}
}

func TestDescribe(t *testing.T) {
	tests := []struct {
		th   Threshold
		want string
	}{
		{Threshold{Signal: signals.MemoryAvailable, Value: Value{Quantity: qty("100Mi")}, Source: "default"}, "memory.available<100Mi hard (default)"},
		{Threshold{Signal: signals.NodeFsAvailable, Value: pct(0.15), Soft: true, GracePeriod: 90 * time.Second, MinReclaim: &Value{Quantity: qty("1Gi")}, Source: "--eviction-soft"},
			"nodefs.available<15% soft grace=1m30s minReclaim=1Gi (--eviction-soft)"},
		{Threshold{Signal: signals.PIDAvailable, Value: Value{Quantity: qty("100")}, Soft: true}, "pid.available<100 soft grace=0s (treated as hard)"},
	}
	for _, tt := range tests {
		if got := tt.th.Describe(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}

func TestDeriveContainerFs(t *testing.T) {
	p, err := Parse(Settings{
		Hard:            map[string]string{"nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%", "imagefs.inodesFree": "4%", "containerfs.available": "50%", "pid.available": "100"},
		Soft:            map[string]string{"nodefs.available": "20%", "imagefs.available": "25%", "containerfs.inodesFree": "50%"},
		SoftGracePeriod: map[string]string{"nodefs.available": "1m", "imagefs.available": "2m", "containerfs.inodesFree": "3m"},
		MinimumReclaim:  map[string]string{"nodefs.available": "1Gi", "imagefs.available": "2Gi"},
	})
	if err != nil {
		t.Fatal(err)
	}
	common := []string{
		"nodefs.available<10% hard minReclaim=1Gi (--eviction-hard)",
		"nodefs.available<20% soft grace=1m0s minReclaim=1Gi (--eviction-soft)",
		"nodefs.inodesFree<5% hard (--eviction-hard)",
		"imagefs.available<15% hard minReclaim=2Gi (--eviction-hard)",
		"imagefs.available<25% soft grace=2m0s minReclaim=2Gi (--eviction-soft)",
		"imagefs.inodesFree<4% hard (--eviction-hard)",
	}
	fromNodefs := func(layout string) []string {
		return append(slices.Clone(common),
			"containerfs.available<10% hard minReclaim=1Gi (derived from nodefs.available ("+layout+" filesystem layout))",
			"containerfs.available<20% soft grace=1m0s minReclaim=1Gi (derived from nodefs.available ("+layout+" filesystem layout))",
			"containerfs.inodesFree<5% hard (derived from nodefs.inodesFree ("+layout+" filesystem layout))",
			"pid.available<100 hard (--eviction-hard)")
	}
	tests := []struct {
		layout signals.FsLayout
		want   []string
	}{
		{signals.SingleFs, fromNodefs("single")},
		{signals.SplitImageFs, fromNodefs("split-imagefs")},
		{signals.DedicatedImageFs, append(slices.Clone(common),
			"containerfs.available<15% hard minReclaim=2Gi (derived from imagefs.available (dedicated-imagefs filesystem layout))",
			"containerfs.available<25% soft grace=2m0s minReclaim=2Gi (derived from imagefs.available (dedicated-imagefs filesystem layout))",
			"containerfs.inodesFree<4% hard (derived from imagefs.inodesFree (dedicated-imagefs filesystem layout))",
			"pid.available<100 hard (--eviction-hard)")},
	}
	before := describe(p.Thresholds)
	for _, tt := range tests {
		t.Run(tt.layout.String(), func(t *testing.T) {
			got := describe(DeriveContainerFs(p.Thresholds, tt.layout))
			if !slices.Equal(got, tt.want) {
				t.Errorf("got\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(tt.want, "\n\t"))
			}
		})
	}
	if after := describe(p.Thresholds); !slices.Equal(after, before) {
		t.Errorf("DeriveContainerFs changed its input: got %q, want %q", after, before)
	}
}

func TestDeriveContainerFsNothingToCopy(t *testing.T) {
	ths := []Threshold{
		{Signal: signals.MemoryAvailable, Value: Value{Quantity: qty("1Gi")}},
		{Signal: signals.ContainerFsAvailable, Value: pct(0.5)},
	}
	for _, layout := range []signals.FsLayout{signals.SingleFs, signals.DedicatedImageFs, signals.SplitImageFs} {
		got := describe(DeriveContainerFs(ths, layout))
		want := []string{"memory.available<1Gi hard"}
		if !slices.Equal(got, want) {
			t.Errorf("%s: got %q, want %q (no empty-operator containerfs thresholds)", layout, got, want)
		}
	}
	if got := DeriveContainerFs(nil, signals.SingleFs); len(got) != 0 {
		t.Errorf("nil input: got %q, want none", describe(got))
	}
}
