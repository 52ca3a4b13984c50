package testruntime

import (
	"slices"
	"strings"
	"testing"
)

// TestMountsUnder reads this process's /proc mounts: /proc itself, and
// nothing that only shares its prefix.
func TestMountsUnder(t *testing.T) {
	got, err := MountsUnder("/proc/")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, "/proc") {
		t.Fatalf("MountsUnder(/proc/): got %q, want /proc among them", got)
	}
	for i, m := range got {
		if m != "/proc" && !strings.HasPrefix(m, "/proc/") {
			t.Errorf("MountsUnder(/proc/): %q is not at or below /proc", m)
		}
		if i > 0 && got[i-1] < m {
			t.Errorf("MountsUnder(/proc/): %q before %q, want deepest first", got[i-1], m)
		}
	}
	if got, err := MountsUnder("/pro"); err != nil || slices.Contains(got, "/proc") {
		t.Errorf("MountsUnder(/pro): got %q, %v, want no /proc", got, err)
	}
}
