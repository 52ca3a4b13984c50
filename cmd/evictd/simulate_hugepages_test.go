package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const giB = int64(1) << 30

// TestSimulateKubeletHugepageCases replays kubelet 1.37's unit test of
// HugepageAwareEviction, TestAdjustForHugePages
// (pkg/kubelet/server/stats/summary_hugepages_test.go), through simulate:
// each case's root memory stats become memory.available (available of
// available + working set, as kubelet 1.36 reads it) and its node capacity
// the snapshot's hugepages. With the gate on (the default) simulate
// decides on the kubelet's adjusted AvailableBytes, and on the capacity
// the kubelet's eviction manager derives from it (available + working
// set); with HugepageAwareEviction=false, on the stats as they were.
func TestSimulateKubeletHugepageCases(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name       string
		memory     string // the observations, "" for none
		hugepages  string // the hugepages object, "" for none
		wantAvail  int64  // -1: no memory.available observation
		wantCap    int64
		wantMinus  int64 // hugePagesSubtracted
		gateOffCap int64
	}{
		// "nil memory stats", "nil AvailableBytes": no memory.available
		// is read, so none is adjusted; hugepages alone change nothing.
		{name: "nil memory stats", hugepages: `{"hugepages-1Gi": "4Gi"}`, wantAvail: -1},
		// "nil node": no node, no capacity, no hugepages.
		{name: "nil node", memory: `{"available": 10000, "capacity": 11000}`, wantAvail: 10000, wantCap: 11000, gateOffCap: 11000},
		{name: "no hugepages in capacity", memory: `{"available": 10000, "capacity": 11000}`, hugepages: `{}`,
			wantAvail: 10000, wantCap: 11000, gateOffCap: 11000},
		{name: "hugepages subtracted from available", memory: `{"available": "10Gi", "capacity": "60Gi"}`, hugepages: `{"hugepages-1Gi": "4Gi"}`,
			wantAvail: 6 * giB, wantCap: 56 * giB, wantMinus: 4 * giB, gateOffCap: 60 * giB},
		{name: "multiple hugepage sizes", memory: `{"available": "10Gi", "capacity": "60Gi"}`, hugepages: `{"hugepages-1Gi": "2Gi", "hugepages-2Mi": "1Gi"}`,
			wantAvail: 7 * giB, wantCap: 57 * giB, wantMinus: 3 * giB, gateOffCap: 60 * giB},
		{name: "hugepages exceed available clamps to zero", memory: `{"available": "2Gi", "capacity": "62Gi"}`, hugepages: `{"hugepages-1Gi": "4Gi"}`,
			wantAvail: 0, wantCap: 60 * giB, wantMinus: 4 * giB, gateOffCap: 62 * giB},
		// Not the kubelet's: nothing was left before, so nothing changes,
		// but the hugepages are still reported as subtracted.
		{name: "nothing available before", memory: `{"available": 0, "capacity": "8Gi"}`, hugepages: `{"hugepages-2Mi": "1Gi"}`,
			wantAvail: 0, wantCap: 8 * giB, wantMinus: giB, gateOffCap: 8 * giB},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fields []string
			if tc.memory != "" {
				fields = append(fields, `"observations": {"memory.available": `+tc.memory+`}`)
			} else {
				fields = append(fields, `"observations": {}`)
			}
			if tc.hugepages != "" {
				fields = append(fields, `"hugepages": `+tc.hugepages)
			}
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".json")
			if err := os.WriteFile(path, []byte("{"+strings.Join(fields, ", ")+"}"), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, gate := range []struct {
				args             []string
				avail, cap, less int64
			}{
				{nil, tc.wantAvail, tc.wantCap, tc.wantMinus},
				{[]string{"--feature-gates=HugepageAwareEviction=true"}, tc.wantAvail, tc.wantCap, tc.wantMinus},
				{[]string{"--feature-gates=HugepageAwareEviction=false"}, tc.gateOffCap - (tc.wantCap - tc.wantAvail), tc.gateOffCap, 0},
			} {
				steps := simulated(t, path, gate.args...)
				var mem *obsResult
				for i, o := range steps[0].Observations {
					if o.Signal == "memory.available" {
						mem = &steps[0].Observations[i]
					}
				}
				if tc.wantAvail < 0 {
					if mem != nil {
						t.Errorf("%v: got memory.available %+v, want none", gate.args, *mem)
					}
					continue
				}
				if mem == nil {
					t.Fatalf("%v: no memory.available in %+v", gate.args, steps[0].Observations)
				}
				if mem.Available != gate.avail || mem.Capacity != gate.cap || mem.HugePagesSubtracted != gate.less {
					t.Errorf("%v: got %d of %d less %d, want %d of %d less %d", gate.args,
						mem.Available, mem.Capacity, mem.HugePagesSubtracted, gate.avail, gate.cap, gate.less)
				}
			}
		})
	}
}

// TestSimulateHugepagesText: the text output says which memory.available
// is in force, once, and on each memory.available line what was done
// with the hugepages; the JSON output carries the step's hugepages.
func TestSimulateHugepagesText(t *testing.T) {
	path := filepath.Join("..", "..", "examples", "hugepages-kubelet-1.37.json")
	out, errOut, code := runCmd("simulate", "--snapshot", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"note: the snapshot has hugepages; memory.available is kubelet 1.37's (HugepageAwareEviction on, the default as in kubelet 1.37;",
		"memory.available  5Gi of 55Gi (less 9Gi of hugepages, as kubelet 1.37)",
		// The kubelet's clamp: nothing left, of the working set alone.
		"memory.available  0 of 55.50Gi (less 9Gi of hugepages, as kubelet 1.37)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, _, _ = runCmd("simulate", "--snapshot", path, "--feature-gates=HugepageAwareEviction=false")
	for _, want := range []string{
		"note: the snapshot has hugepages; memory.available is kubelet 1.36's (HugepageAwareEviction=false, from --feature-gates)",
		"memory.available  14Gi of 64Gi (9Gi of hugepages left in, as kubelet 1.36)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("with the gate off, output lacks %q:\n%s", want, out)
		}
	}
	steps := simulated(t, path)
	if got := steps[0].HugePages; got != 9*giB {
		t.Errorf("JSON hugePages: got %d, want 9Gi", got)
	}
	b, _ := json.Marshal(steps[0].Observations)
	if !strings.Contains(string(b), fmt.Sprintf(`"hugePagesSubtracted":%d`, 9*giB)) {
		t.Errorf("JSON observations lack hugePagesSubtracted: %s", b)
	}
	// A snapshot without hugepages says nothing of them.
	out, _, _ = runCmd("simulate", "--snapshot", filepath.Join("..", "..", "examples", "seed-soft-grace-30s.json"))
	if strings.Contains(out, "hugepages") {
		t.Errorf("a snapshot without hugepages mentions them:\n%s", out)
	}
}
