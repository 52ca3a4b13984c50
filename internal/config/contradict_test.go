package config

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/evictd/evictd/signals"
)

func TestSafetyLimitFlags(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		wantErr   string
		wantCap   int
		wantQPS   float64
		wantBurst int
	}{
		{name: "defaults", wantCap: 60, wantQPS: 0.1, wantBurst: 5},
		{name: "no cap, no rate limit", args: []string{"--max-evictions-per-hour=0", "--local-storage-eviction-qps=0", "--local-storage-eviction-burst=0"},
			wantCap: 0, wantQPS: 0, wantBurst: 0},
		{name: "set", args: []string{"--max-evictions-per-hour=12", "--local-storage-eviction-qps=2.5", "--local-storage-eviction-burst=1"},
			wantCap: 12, wantQPS: 2.5, wantBurst: 1},
		{name: "negative cap", args: []string{"--max-evictions-per-hour=-1"},
			wantErr: `--max-evictions-per-hour: invalid value "-1": must not be negative (0 means no cap)`},
		{name: "negative rate", args: []string{"--local-storage-eviction-qps=-0.5"},
			wantErr: `--local-storage-eviction-qps: invalid value "-0.5": must be a non-negative number of evictions per second (0 means no limit)`},
		{name: "infinite rate", args: []string{"--local-storage-eviction-qps=+Inf"},
			wantErr: `--local-storage-eviction-qps: invalid value "+Inf": must be a non-negative number of evictions per second (0 means no limit)`},
		{name: "NaN rate", args: []string{"--local-storage-eviction-qps=NaN"},
			wantErr: `--local-storage-eviction-qps: invalid value "NaN": must be a non-negative number of evictions per second (0 means no limit)`},
		{name: "rate without a burst", args: []string{"--local-storage-eviction-burst=0"},
			wantErr: `--local-storage-eviction-burst: invalid value "0": must be at least 1 while --local-storage-eviction-qps is set`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := complete(tt.args...)
			if tt.wantErr != "" {
				if got := errText(err); got != tt.wantErr {
					t.Fatalf("got error %q, want %q", got, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.MaxEvictionsPerHour != tt.wantCap || c.LocalStorageEvictionQPS != tt.wantQPS || c.LocalStorageEvictionBurst != tt.wantBurst {
				t.Errorf("got cap %d, qps %v, burst %d; want %d, %v, %d", c.MaxEvictionsPerHour, c.LocalStorageEvictionQPS,
					c.LocalStorageEvictionBurst, tt.wantCap, tt.wantQPS, tt.wantBurst)
			}
		})
	}
}

func TestSoftThresholdNotBeyondHard(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{name: "defaults: no soft thresholds", want: nil},
		{name: "soft above hard is fine",
			args: []string{"--eviction-hard=memory.available<100Mi", "--eviction-soft=memory.available<500Mi", "--eviction-soft-grace-period=memory.available=1m"}},
		{name: "soft below hard",
			args: []string{"--eviction-hard=memory.available<500Mi", "--eviction-soft=memory.available<100Mi", "--eviction-soft-grace-period=memory.available=1m"},
			want: []string{"--eviction-soft: soft threshold memory.available<100Mi is not beyond the hard threshold memory.available<500Mi (--eviction-hard): it can never act before the hard one"}},
		{name: "soft equal to hard, in percentages",
			args: []string{"--eviction-hard=nodefs.available<10%", "--eviction-soft=nodefs.available<10%", "--eviction-soft-grace-period=nodefs.available=1m"},
			want: []string{"--eviction-soft: soft threshold nodefs.available<10% is not beyond the hard threshold nodefs.available<10% (--eviction-hard): it can never act before the hard one"}},
		{name: "a default hard threshold counts",
			args: []string{"--eviction-soft=imagefs.available<10%", "--eviction-soft-grace-period=imagefs.available=1m"},
			want: []string{"--eviction-soft: soft threshold imagefs.available<10% is not beyond the hard threshold imagefs.available<15% (default): it can never act before the hard one"}},
		{name: "stall signals: a soft stall at or above the hard one",
			args: []string{"--eviction-hard=memory.pressure.full.avg10>20", "--eviction-soft=memory.pressure.full.avg10>30", "--eviction-soft-grace-period=memory.pressure.full.avg10=30s"},
			want: []string{"--eviction-soft: soft threshold memory.pressure.full.avg10>30% is not beyond the hard threshold memory.pressure.full.avg10>20% (--eviction-hard): it can never act before the hard one"}},
		{name: "a quantity against a percentage waits for the capacity",
			args: []string{"--eviction-hard=nodefs.available<10%", "--eviction-soft=nodefs.available<1Mi", "--eviction-soft-grace-period=nodefs.available=1m"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := complete(tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(c.Warnings, tt.want) {
				t.Errorf("got warnings %q, want %q", c.Warnings, tt.want)
			}
		})
	}
}

func TestCheckCapacity(t *testing.T) {
	const gi = int64(1) << 30
	obs := signals.Observations{
		signals.MemoryAvailable:            {Signal: signals.MemoryAvailable, Available: 20 * gi, Capacity: 24 * gi, Time: time.Now()},
		signals.AllocatableMemoryAvailable: {Signal: signals.AllocatableMemoryAvailable, Available: 20 * gi, Capacity: 24 * gi, Time: time.Now()},
		signals.NodeFsAvailable:            {Signal: signals.NodeFsAvailable, Available: 50 * gi, Capacity: 100 * gi, Time: time.Now()},
		signals.PIDAvailable:               {Signal: signals.PIDAvailable, Available: 4000, Capacity: 4194304, Time: time.Now()},
		signals.MemoryPressureFullAvg10:    {Signal: signals.MemoryPressureFullAvg10, Available: 0, Capacity: signals.StallScale, Time: time.Now()},
	}
	// A node with a dedicated image filesystem of 50Gi, which holds the
	// containers' writable layers (containerfs).
	dedicated := maps.Clone(obs)
	dedicated[signals.ImageFsAvailable] = signals.Observation{Signal: signals.ImageFsAvailable, Available: 10 * gi, Capacity: 50 * gi, Time: time.Now()}
	dedicated[signals.ContainerFsAvailable] = signals.Observation{Signal: signals.ContainerFsAvailable, Available: 10 * gi, Capacity: 50 * gi, Time: time.Now()}
	tests := []struct {
		name         string
		args         []string
		obs          signals.Observations
		layout       signals.FsLayout
		wantSetAside []string // "threshold: error"
		wantKept     []string
		wantWarnings []string
	}{
		{name: "defaults fit", obs: obs,
			wantKept: []string{"memory.available<100Mi", "allocatableMemory.available<100Mi", "nodefs.available<10%", "nodefs.inodesFree<5%", "imagefs.available<15%", "imagefs.inodesFree<5%"}},
		{name: "memory threshold above a 24Gi machine's memory",
			args: []string{"--eviction-hard=memory.available<100Gi,nodefs.available<10%"}, obs: obs,
			wantSetAside: []string{
				"memory.available<100Gi: --eviction-hard: threshold memory.available<100Gi is 100Gi, at or above the capacity of memory.available on this node (24Gi): it would always be met and evict pod after pod",
				"allocatableMemory.available<100Gi: derived from memory.available (enforce-node-allocatable=pods): threshold allocatableMemory.available<100Gi is 100Gi, at or above the capacity of allocatableMemory.available on this node (24Gi): it would always be met and evict pod after pod",
			},
			wantKept: []string{"nodefs.available<10%"}},
		{name: "equal to the capacity",
			args: []string{"--eviction-hard=pid.available<4194304", "--enforce-node-allocatable=none"}, obs: obs,
			wantSetAside: []string{"pid.available<4194304: --eviction-hard: threshold pid.available<4194304 is 4194304, at or above the capacity of pid.available on this node (4194304): it would always be met and evict pod after pod"}},
		{name: "a soft threshold too, named by its own source; its hard one stays",
			args: []string{"--eviction-soft=nodefs.available<200Gi", "--eviction-soft-grace-period=nodefs.available=1m", "--eviction-hard=nodefs.available<10%"}, obs: obs,
			wantSetAside: []string{"nodefs.available<200Gi: --eviction-soft: threshold nodefs.available<200Gi is 200Gi, at or above the capacity of nodefs.available on this node (100Gi): it would always be met and evict pod after pod"},
			wantKept:     []string{"nodefs.available<10%"}},
		{name: "an imagefs threshold beyond a dedicated image filesystem, and its containerfs one: set aside once",
			args: []string{"--eviction-hard=imagefs.available<60Gi,memory.available<1Gi", "--enforce-node-allocatable=none"}, obs: dedicated, layout: signals.DedicatedImageFs,
			wantSetAside: []string{"imagefs.available<60Gi: --eviction-hard: threshold imagefs.available<60Gi is 60Gi, at or above the capacity of imagefs.available on this node (50Gi): it would always be met and evict pod after pod"},
			wantKept:     []string{"memory.available<1Gi"}},
		{name: "an unobserved signal is not checked",
			args: []string{"--eviction-hard=imagefs.available<100Ti"}, obs: obs, wantKept: []string{"imagefs.available<100Ti"}},
		{name: "a stall threshold is a share of time",
			args: []string{"--eviction-hard=memory.pressure.full.avg10>99"}, obs: obs, wantKept: []string{"memory.pressure.full.avg10>99%"}},
		{name: "a soft quantity below a hard percentage, resolved with the capacity",
			args: []string{"--eviction-hard=nodefs.available<10%", "--eviction-soft=nodefs.available<5Gi", "--eviction-soft-grace-period=nodefs.available=1m"}, obs: obs,
			wantKept:     []string{"nodefs.available<10%", "nodefs.available<5Gi"},
			wantWarnings: []string{"--eviction-soft: soft threshold nodefs.available<5Gi is not beyond the hard threshold nodefs.available<10% (--eviction-hard): it can never act before the hard one (5Gi against 10737418400 of 100Gi)"}},
		{name: "a soft quantity above a hard percentage is fine",
			args: []string{"--eviction-hard=nodefs.available<10%", "--eviction-soft=nodefs.available<20Gi", "--eviction-soft-grace-period=nodefs.available=1m"}, obs: obs,
			wantKept: []string{"nodefs.available<10%", "nodefs.available<20Gi"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := complete(tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			warnings, setAside := CheckCapacity(c.Thresholds, tt.obs, tt.layout)
			var gotAside, gotKept []string
			for _, s := range setAside {
				gotAside = append(gotAside, s.Threshold.String()+": "+s.Err.Error())
			}
			for _, th := range WithoutSetAside(c.Thresholds, setAside) {
				gotKept = append(gotKept, th.String())
			}
			if !slices.Equal(gotAside, tt.wantSetAside) {
				t.Errorf("set aside:\ngot  %q\nwant %q", gotAside, tt.wantSetAside)
			}
			if !slices.Equal(gotKept, tt.wantKept) {
				t.Errorf("kept: got %q, want %q", gotKept, tt.wantKept)
			}
			if !slices.Equal(warnings, tt.wantWarnings) {
				t.Errorf("got warnings %q, want %q", warnings, tt.wantWarnings)
			}
		})
	}
}

func TestPercentageOver100IsRefused(t *testing.T) {
	_, err := complete("--eviction-hard=memory.available<101%")
	if want := "--eviction-hard: eviction percentage threshold memory.available must be <= 100%: 101%"; errText(err) != want {
		t.Errorf("got %q, want %q", errText(err), want)
	}
}
