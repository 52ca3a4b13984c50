package nodestatus

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/evictd/evictd/internal/decide"
	"github.com/evictd/evictd/signals"
)

var (
	t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	t1 = t0.Add(time.Minute)
	t2 = t0.Add(2 * time.Minute)
)

func defaultConfig(t *testing.T) Config {
	t.Helper()
	cfg, err := Config{NodeName: "node-a"}.complete()
	if err != nil {
		t.Fatalf("complete: %v", err)
	}
	return cfg
}

func mem(active bool, since time.Time, msg string) decide.PressureReport {
	return decide.PressureReport{Pressure: signals.MemoryPressure, Active: active, Since: since, Message: msg}
}

func TestBuildConditions(t *testing.T) {
	cfg := defaultConfig(t)
	now := t2
	tests := []struct {
		name     string
		states   []pressureState
		existing []v1.NodeCondition
		want     []v1.NodeCondition
	}{{
		name:   "active memory pressure takes the tracker's transition time",
		states: []pressureState{{Report: mem(true, t1, "threshold memory.available<100Mi is met: available 80Mi of 2Gi"), FirstSeen: t0}},
		want: []v1.NodeCondition{{Type: "EvictdMemoryPressure", Status: v1.ConditionTrue, Reason: "EvictdHasMemoryPressure",
			Message: "threshold memory.available<100Mi is met: available 80Mi of 2Gi", LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(t1)}},
	}, {
		name: "never active: the first publish time, in report order",
		states: []pressureState{
			{Report: decide.PressureReport{Pressure: signals.DiskPressure, Message: "no disk threshold is met"}, FirstSeen: t0},
			{Report: decide.PressureReport{Pressure: signals.PIDPressure}, FirstSeen: t1},
		},
		want: []v1.NodeCondition{
			{Type: "EvictdDiskPressure", Status: v1.ConditionFalse, Reason: "EvictdHasNoDiskPressure", Message: "no disk threshold is met",
				LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(t0)},
			{Type: "EvictdPIDPressure", Status: v1.ConditionFalse, Reason: "EvictdHasNoPIDPressure", Message: "evictd has no pid pressure",
				LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(t1)},
		},
	}, {
		name:     "restart: the node's earlier transition time stands while the status holds",
		states:   []pressureState{{Report: mem(true, t1, "m"), FirstSeen: t1}},
		existing: []v1.NodeCondition{{Type: "EvictdMemoryPressure", Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}},
		want: []v1.NodeCondition{{Type: "EvictdMemoryPressure", Status: v1.ConditionTrue, Reason: "EvictdHasMemoryPressure",
			Message: "m", LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(t0)}},
	}, {
		name:     "restart with another status: the new transition time",
		states:   []pressureState{{Report: mem(false, time.Time{}, "m"), FirstSeen: t1}},
		existing: []v1.NodeCondition{{Type: "EvictdMemoryPressure", Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}},
		want: []v1.NodeCondition{{Type: "EvictdMemoryPressure", Status: v1.ConditionFalse, Reason: "EvictdHasNoMemoryPressure",
			Message: "m", LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(t1)}},
	}, {
		name:     "a transition this process saw wins over the node's older time",
		states:   []pressureState{{Report: mem(true, t2, "m"), FirstSeen: t0, Transitioned: true}},
		existing: []v1.NodeCondition{{Type: "EvictdMemoryPressure", Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}},
		want: []v1.NodeCondition{{Type: "EvictdMemoryPressure", Status: v1.ConditionTrue, Reason: "EvictdHasMemoryPressure",
			Message: "m", LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(t2)}},
	}, {
		name:     "the kubelet's condition of the same kind is not looked at",
		states:   []pressureState{{Report: mem(true, t1, "m"), FirstSeen: t1}},
		existing: []v1.NodeCondition{{Type: v1.NodeMemoryPressure, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}},
		want: []v1.NodeCondition{{Type: "EvictdMemoryPressure", Status: v1.ConditionTrue, Reason: "EvictdHasMemoryPressure",
			Message: "m", LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(t1)}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := buildConditions(cfg, tt.states, tt.existing, now)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestSetTaints(t *testing.T) {
	cfg := defaultConfig(t)
	noExec := cfg
	noExec.TaintEffect = v1.TaintEffectNoExecute
	maint := v1.Taint{Key: "example.com/maintenance", Value: "yes", Effect: v1.TaintEffectNoExecute}
	memTaint := v1.Taint{Key: "evictd.io/memory-pressure", Effect: v1.TaintEffectNoSchedule}
	diskTaint := v1.Taint{Key: "evictd.io/disk-pressure", Effect: v1.TaintEffectNoSchedule}
	kubelet := v1.Taint{Key: "node.kubernetes.io/memory-pressure", Effect: v1.TaintEffectNoSchedule}
	st := func(p signals.Pressure, active bool) pressureState {
		return pressureState{Report: decide.PressureReport{Pressure: p, Active: active}}
	}
	added := metav1.NewTime(t1)
	tests := []struct {
		name        string
		cfg         Config
		taints      []v1.Taint
		states      []pressureState
		want        []v1.Taint
		wantChanged bool
	}{
		{"add to others, which keep their order", cfg, []v1.Taint{maint, kubelet},
			[]pressureState{st(signals.MemoryPressure, true)}, []v1.Taint{maint, kubelet, memTaint}, true},
		{"already present: nothing to write", cfg, []v1.Taint{memTaint, maint},
			[]pressureState{st(signals.MemoryPressure, true), st(signals.DiskPressure, false)}, []v1.Taint{memTaint, maint}, false},
		{"remove only evictd's cleared key", cfg, []v1.Taint{kubelet, memTaint, maint, diskTaint},
			[]pressureState{st(signals.MemoryPressure, false), st(signals.DiskPressure, true)}, []v1.Taint{kubelet, maint, diskTaint}, true},
		{"kinds without a report are left alone", cfg, []v1.Taint{diskTaint},
			[]pressureState{st(signals.MemoryPressure, false)}, []v1.Taint{diskTaint}, false},
		{"nil taints, nothing active", cfg, nil,
			[]pressureState{st(signals.MemoryPressure, false)}, []v1.Taint{}, false},
		{"effect changed by configuration", noExec, []v1.Taint{memTaint},
			[]pressureState{st(signals.MemoryPressure, true)},
			[]v1.Taint{{Key: "evictd.io/memory-pressure", Effect: v1.TaintEffectNoExecute, TimeAdded: &added}}, true},
		{"duplicates of evictd's key collapse to one", cfg, []v1.Taint{memTaint, maint, memTaint},
			[]pressureState{st(signals.MemoryPressure, true)}, []v1.Taint{memTaint, maint}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := setTaints(tt.cfg, tt.taints, tt.states, t1)
			if !reflect.DeepEqual(got, tt.want) || changed != tt.wantChanged {
				t.Errorf("got %+v changed=%v, want %+v changed=%v", got, changed, tt.want, tt.wantChanged)
			}
		})
	}
}

func TestTransitionEvent(t *testing.T) {
	cfg := defaultConfig(t)
	trueCond := []v1.NodeCondition{{Type: "EvictdMemoryPressure", Status: v1.ConditionTrue}}
	falseCond := []v1.NodeCondition{{Type: "EvictdMemoryPressure", Status: v1.ConditionFalse}}
	kubeletOnly := []v1.NodeCondition{{Type: v1.NodeMemoryPressure, Status: v1.ConditionTrue}}
	tests := []struct {
		name      string
		tr        transition
		existing  []v1.NodeCondition
		late      bool
		wantOK    bool
		wantType  string
		wantRsn   string
		wantInMsg string
	}{
		{"starts: Warning", transition{Pressure: signals.MemoryPressure, Active: true, Message: "met"}, falseCond, false,
			true, v1.EventTypeWarning, "EvictdMemoryPressure", "met"},
		{"ends: Normal", transition{Pressure: signals.MemoryPressure, Message: "clear"}, trueCond, false,
			true, v1.EventTypeNormal, "EvictdNoMemoryPressure", "clear"},
		{"late: says when", transition{Pressure: signals.PIDPressure, Active: true, Message: "met", At: t1}, nil, true,
			true, v1.EventTypeWarning, "EvictdPIDPressure", "met (at 2026-03-01T12:01:00Z; reported late, after failed writes to the API server)"},
		{"initial inactive on a fresh node: none", transition{Pressure: signals.MemoryPressure, Initial: true}, kubeletOnly, false,
			false, "", "", ""},
		{"initial active on a fresh node", transition{Pressure: signals.MemoryPressure, Active: true, Initial: true, Message: "m"}, kubeletOnly, false,
			true, v1.EventTypeWarning, "EvictdMemoryPressure", "m"},
		{"initial same as the node (restart): none", transition{Pressure: signals.MemoryPressure, Active: true, Initial: true}, trueCond, false,
			false, "", "", ""},
		{"initial differs from the node", transition{Pressure: signals.MemoryPressure, Initial: true, Message: "c"}, trueCond, false,
			true, v1.EventTypeNormal, "EvictdNoMemoryPressure", "c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			typ, reason, msg, ok := transitionEvent(cfg, tt.tr, tt.existing, tt.late)
			if ok != tt.wantOK || typ != tt.wantType || reason != tt.wantRsn || !strings.Contains(msg, tt.wantInMsg) {
				t.Errorf("got (%q, %q, %q, %v), want (%q, %q, ~%q, %v)", typ, reason, msg, ok, tt.wantType, tt.wantRsn, tt.wantInMsg, tt.wantOK)
			}
		})
	}
}

// TestStatusPatchMergesByType applies the patch with the API server's own
// strategic-merge code: the kubelet's conditions stay exactly as they were.
func TestStatusPatchMergesByType(t *testing.T) {
	cfg := defaultConfig(t)
	kubelet := []v1.NodeCondition{
		{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse, Reason: "KubeletHasSufficientMemory",
			LastHeartbeatTime: metav1.NewTime(t0), LastTransitionTime: metav1.NewTime(t0)},
		{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.NewTime(t0), LastTransitionTime: metav1.NewTime(t0)},
	}
	old := v1.Node{Status: v1.NodeStatus{Conditions: append(append([]v1.NodeCondition(nil), kubelet...),
		v1.NodeCondition{Type: "EvictdMemoryPressure", Status: v1.ConditionFalse, LastTransitionTime: metav1.NewTime(t0)})}}
	conds := buildConditions(cfg, []pressureState{{Report: mem(true, t1, "m"), FirstSeen: t0}}, old.Status.Conditions, t2)
	patch, err := statusPatch(conds)
	if err != nil {
		t.Fatal(err)
	}
	oldJSON, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	merged, err := strategicpatch.StrategicMergePatch(oldJSON, patch, v1.Node{})
	if err != nil {
		t.Fatalf("apply patch %s: %v", patch, err)
	}
	var got v1.Node
	if err := json.Unmarshal(merged, &got); err != nil {
		t.Fatal(err)
	}
	want := append(append([]v1.NodeCondition(nil), kubelet...), conds...)
	if !apiequality.Semantic.DeepEqual(got.Status.Conditions, want) {
		t.Errorf("got conditions %+v\nwant %+v", got.Status.Conditions, want)
	}
}

// TestReportJitter: the report period is uniform in [0.5, 1.5) × the
// frequency, as the kubelet's, and spreads: a fleet of agents started
// together does not write together.
func TestReportJitter(t *testing.T) {
	const d = 5 * time.Minute
	var lo, hi int
	for range 10000 {
		p := reportJitter(d)
		if p < d/2 || p >= d*3/2 {
			t.Fatalf("reportJitter(%s) = %s, want in [%s, %s)", d, p, d/2, d*3/2)
		}
		if p < d {
			lo++
		} else {
			hi++
		}
	}
	if lo < 4500 || hi < 4500 {
		t.Errorf("of 10000 periods %d below %s and %d above, want about half each", lo, d, hi)
	}
}

func TestConfigComplete(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"defaults", Config{NodeName: "n"}, ""},
		{"partial maps keep the other defaults", Config{NodeName: "n",
			ConditionTypes: map[signals.Pressure]v1.NodeConditionType{signals.MemoryPressure: "example.com/MemoryContention"},
			TaintKeys:      map[signals.Pressure]string{signals.PIDPressure: "example.com/pids"}}, ""},
		{"no node", Config{}, "node name is required"},
		{"bad node", Config{NodeName: "Node_A"}, `node name "Node_A"`},
		{"kubelet condition", Config{NodeName: "n", ConditionTypes: map[signals.Pressure]v1.NodeConditionType{signals.MemoryPressure: "MemoryPressure"}},
			`condition type "MemoryPressure" for memory pressure belongs to the kubelet`},
		{"duplicate condition", Config{NodeName: "n", ConditionTypes: map[signals.Pressure]v1.NodeConditionType{signals.DiskPressure: "EvictdMemoryPressure"}},
			`condition type "EvictdMemoryPressure" is given for both memory and disk pressure`},
		{"unknown pressure", Config{NodeName: "n", TaintKeys: map[signals.Pressure]string{"cpu": "evictd.io/cpu"}},
			`unknown pressure "cpu" in taint keys`},
		{"controller's taint", Config{NodeName: "n", TaintKeys: map[signals.Pressure]string{signals.DiskPressure: "node.kubernetes.io/disk-pressure"}},
			`taint key "node.kubernetes.io/disk-pressure" for disk pressure belongs to the node lifecycle controller`},
		{"bad taint key", Config{NodeName: "n", TaintKeys: map[signals.Pressure]string{signals.DiskPressure: "a b"}},
			`taint key "a b" for disk pressure`},
		{"bad effect", Config{NodeName: "n", TaintEffect: "NoScheduleAtAll"}, `taint effect "NoScheduleAtAll"`},
		{"negative frequency", Config{NodeName: "n", UpdateFrequency: -time.Second}, "node status update frequency -1s must be positive"},
		{"negative report frequency", Config{NodeName: "n", ReportFrequency: -time.Minute}, "node status report frequency -1m0s must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.cfg.complete()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("got error %v, want none", err)
				}
				if got.TaintEffect != v1.TaintEffectNoSchedule || got.UpdateFrequency != 10*time.Second || got.ReportFrequency != 5*time.Minute ||
					got.Jitter == nil || got.Retry != DefaultRetry || got.Clock == nil ||
					len(got.ConditionTypes) != 3 || len(got.TaintKeys) != 3 {
					t.Errorf("defaults not filled in: %+v", got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("got error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
