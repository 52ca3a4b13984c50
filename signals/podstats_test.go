package signals

import "testing"

func TestPodStatsKinds(t *testing.T) {
	for _, tc := range []struct {
		k    PodStatsKinds
		want string
	}{
		{0, "none"},
		{PodMemory, "memory"},
		{PodMemory | PodDisk, "memory,disk"},
		{PodMemory | PodProcesses | PodDisk, "memory,processes,disk"},
	} {
		if got := tc.k.String(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
	if k := PodMemory | PodDisk; !k.Has(PodDisk) || k.Has(PodProcesses) || k.Has(PodMemory|PodProcesses) {
		t.Errorf("Has of %s is wrong", k)
	}
}
