package manager

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/evictd/evictd/signals"
)

// oomCounts is a fake OOMKillCounter: the counts it is set to, and an
// error.
type oomCounts struct {
	mu     sync.Mutex
	counts map[signals.OOMScope]int64
	err    error
	reads  int
}

func (o *oomCounts) set(counts map[signals.OOMScope]int64, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.counts, o.err = counts, err
}

func (o *oomCounts) OOMKills(_ context.Context, now time.Time) (signals.OOMKills, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reads++
	out := signals.OOMKills{Time: now, Counts: map[signals.OOMScope]int64{}}
	for s, n := range o.counts {
		out.Counts[s] = n
	}
	return out, o.err
}

func (o *oomCounts) readCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.reads
}

// oomSeries is evictd_oom_kills_total by scope.
func oomSeries(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "evictd_oom_kills_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	return out
}

func TestLoopCountsOOMKills(t *testing.T) {
	type counts = map[signals.OOMScope]int64
	const node, pods = signals.OOMScopeNode, signals.OOMScopeKubepods
	oom := &oomCounts{counts: counts{node: 40, pods: 7}}
	ev := &events{}
	h := newHarnessTuned(t, false, nil, defaultPods(), defaultStats(), func(_ *Config, d *Deps) {
		d.OOMKills, d.Events = oom, ev
	})
	at := func(n int) string { return t0.Add(time.Duration(n) * 10 * time.Second).Format(time.RFC3339) }
	steps := []struct {
		name      string
		counts    counts
		err       error
		wake      bool // a wake-up pass, not a tick
		want      map[string]float64
		wantEvent string // "" for none
	}{
		{name: "baseline", want: map[string]float64{"node": 0, "kubepods": 0}},
		{name: "a burst: one event for both scopes", counts: counts{node: 43, pods: 10},
			want:      map[string]float64{"node": 3, "kubepods": 3},
			wantEvent: "OOMKillNotPrevented: The kernel's OOM killer killed 3 processes on this node, 3 of them in pods, between " + at(0) + " and " + at(1) + " (evictd_oom_kills_total). A kill at a container's own memory limit is the container's; any other is a shortage evictd did not prevent: see the pods' OOMKilled containers and the kernel log."},
		{name: "a wake-up pass reads nothing", counts: counts{node: 50, pods: 10}, wake: true,
			want: map[string]float64{"node": 3, "kubepods": 3}},
		{name: "kubepods unreadable", counts: counts{node: 51}, err: errors.New("read kubepods/memory.events: no such file"),
			want:      map[string]float64{"node": 11, "kubepods": 3},
			wantEvent: "OOMKillNotPrevented: The kernel's OOM killer killed 8 processes on this node between " + at(1) + " and " + at(2)},
		{name: "kubepods read again: what rose meanwhile counts", counts: counts{node: 51, pods: 12},
			want:      map[string]float64{"node": 11, "kubepods": 5},
			wantEvent: "OOMKillNotPrevented: The kernel's OOM killer killed 2 processes in pods between " + at(2) + " and " + at(3)},
		{name: "kubepods made again: its count restarts", counts: counts{node: 52, pods: 1},
			want:      map[string]float64{"node": 12, "kubepods": 6},
			wantEvent: "OOMKillNotPrevented: The kernel's OOM killer killed 1 process on this node, 1 of them in pods, between " + at(3) + " and " + at(4)},
		{name: "nothing new", counts: counts{node: 52, pods: 1},
			want: map[string]float64{"node": 12, "kubepods": 6}},
	}
	for i, step := range steps {
		if i > 0 {
			oom.set(step.counts, step.err)
			before := oom.readCount()
			if step.wake {
				h.m.Wake()
				h.next("wake")
			} else {
				h.tick()
			}
			if reads := oom.readCount() - before; step.wake && reads != 0 || !step.wake && reads != 1 {
				t.Errorf("%s: read the counts %d times", step.name, reads)
			}
		} else {
			h.next("start")
		}
		if got := oomSeries(t, h.reg); !maps.Equal(got, step.want) {
			t.Errorf("%s: evictd_oom_kills_total got %v, want %v", step.name, got, step.want)
		}
		got := ev.list()
		ev.mu.Lock()
		ev.got = nil
		ev.mu.Unlock()
		switch {
		case step.wantEvent == "" && len(got) != 0:
			t.Errorf("%s: got events %q, want none", step.name, got)
		case step.wantEvent != "" && (len(got) != 1 || !strings.HasPrefix(got[0], step.wantEvent)):
			t.Errorf("%s: got events %q, want one: %q", step.name, got, step.wantEvent)
		}
	}
	// The OOM kills never make the loop act.
	if got := h.ev.evicted(); len(got) != 0 {
		t.Errorf("evicted %v, want nothing", got)
	}
}

// TestLoopOOMKillsWithoutKubepodsScope is a cgroup v1 node: the node
// scope alone, and no kubepods series at 0 that could never count.
func TestLoopOOMKillsWithoutKubepodsScope(t *testing.T) {
	oom := &oomCounts{counts: map[signals.OOMScope]int64{signals.OOMScopeNode: 3}}
	h := newHarnessTuned(t, false, nil, defaultPods(), defaultStats(), func(_ *Config, d *Deps) { d.OOMKills = oom })
	h.next("start")
	oom.set(map[signals.OOMScope]int64{signals.OOMScopeNode: 5}, nil)
	h.tick() // no Events sink: counted all the same
	want := `
# HELP evictd_oom_kills_total ` + oomHelp(t, h.reg) + `
# TYPE evictd_oom_kills_total counter
evictd_oom_kills_total{scope="node"} 2
`
	if err := testutil.GatherAndCompare(h.reg, strings.NewReader(want), "evictd_oom_kills_total"); err != nil {
		t.Error(err)
	}
}

// TestLoopOOMKillsUnreadableAtStart: no baseline, no series, until the
// first reading; kills before it are not counted.
func TestLoopOOMKillsUnreadableAtStart(t *testing.T) {
	oom := &oomCounts{err: errors.New("read /proc/vmstat: permission denied")}
	h := newHarnessTuned(t, false, nil, defaultPods(), defaultStats(), func(_ *Config, d *Deps) { d.OOMKills = oom })
	h.next("start")
	if got := oomSeries(t, h.reg); len(got) != 0 {
		t.Errorf("start: got %v, want no series", got)
	}
	oom.set(map[signals.OOMScope]int64{signals.OOMScopeNode: 9}, nil)
	h.tick()
	if got := oomSeries(t, h.reg); !maps.Equal(got, map[string]float64{"node": 0}) {
		t.Errorf("first reading: got %v, want node at 0", got)
	}
}

func oomHelp(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "evictd_oom_kills_total" {
			return mf.GetHelp()
		}
	}
	t.Fatal("no evictd_oom_kills_total")
	return ""
}
