package systemd

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const dropInDir = "evictd.service.d"

// Exposure of the unit with the drop-in examples, as systemd-analyze
// security rates it (systemd 252). api-server.conf allows a non-localhost
// address, which it counts (0.1 more than the unit's localhost-only list);
// own-user.conf runs evictd as a user of its own. Each is 0.1 more since
// CAP_KILL joined the bounding set.
const (
	maxExposureAPIServer = 2.2
	maxExposureOwnUser   = 1.9
)

// withDropIns installs the named drop-in examples (systemd/evictd.service.d/
// NAME.conf.example) as NAME.conf beside the unit copy at unit, where
// systemd-analyze looks for them.
func withDropIns(t *testing.T, unit string, names ...string) {
	t.Helper()
	dir := filepath.Join(filepath.Dir(unit), dropInDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(dropInDir, name+".conf.example"))
		if err != nil {
			t.Fatalf("read drop-in example: %v", err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".conf"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDropInExamples checks each drop-in example shipped beside the unit:
// systemd-analyze verify accepts the unit with it, and security rates them
// no worse than their bound and counts what shows they were read.
func TestDropInExamples(t *testing.T) {
	analyze := systemdAnalyze(t)
	examples, err := filepath.Glob(filepath.Join(dropInDir, "*.conf.example"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range examples {
		names = append(names, strings.TrimSuffix(filepath.Base(e), ".conf.example"))
	}
	if want := []string{"api-server", "own-user"}; !slices.Equal(names, want) {
		t.Errorf("got drop-in examples %q, want %q (each with its bound here)", names, want)
	}
	for _, tc := range []struct {
		dropIns []string
		max     float64
		counted string // a line security prints only with the drop-in
	}{
		{[]string{"api-server"}, maxExposureAPIServer, "IP address allow list with non-localhost entries"},
		{[]string{"own-user"}, maxExposureOwnUser, "Service process receives ambient capabilities"},
		{[]string{"api-server", "own-user"}, maxExposureOwnUser, "IP address allow list with non-localhost entries"},
	} {
		t.Run(strings.Join(tc.dropIns, "+"), func(t *testing.T) {
			unit := verifiable(t, "")
			withDropIns(t, unit, tc.dropIns...)
			if problems := verify(t, analyze, unit); len(problems) > 0 {
				t.Errorf("got problems, want none:\n%s", strings.Join(problems, "\n"))
			}
			score, against := exposure(t, analyze, unit)
			t.Logf("exposure %.1f; counted against the unit:\n%s", score, strings.Join(against, "\n"))
			if score > tc.max {
				t.Errorf("got exposure %.1f, want at most %.1f", score, tc.max)
			}
			if !slices.ContainsFunc(against, func(l string) bool { return strings.Contains(l, tc.counted) }) {
				t.Errorf("security does not count %q: the drop-in was not read", tc.counted)
			}
		})
	}
}

// TestVerifyReadsDropIns makes sure the checks above see the drop-ins: a
// mistake in one is reported.
func TestVerifyReadsDropIns(t *testing.T) {
	analyze := systemdAnalyze(t)
	unit := verifiable(t, "")
	dir := filepath.Join(filepath.Dir(unit), dropInDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.conf"), []byte("[Service]\nFrobnicate=yes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if problems := verify(t, analyze, unit); len(problems) == 0 {
		t.Error("got no problems with Frobnicate=yes in a drop-in, want some")
	}
}

// TestOwnUserDropIn checks what the own-user example promises: a user of
// evictd's own with CAP_DAC_READ_SEARCH and CAP_KILL as its capabilities, the
// unit's bounding set, and a supplementary group for the CRI socket.
func TestOwnUserDropIn(t *testing.T) {
	d := unitSettings(t, filepath.Join(dropInDir, "own-user.conf.example"))["Service"]
	u := unitSettings(t, unitFile)["Service"]
	if got := d["DynamicUser"]; !slices.Equal(got, []string{"yes"}) {
		t.Errorf("got DynamicUser=%q, want yes", got)
	}
	if got, bound := d["AmbientCapabilities"], u["CapabilityBoundingSet"]; !slices.Equal(got, []string{"CAP_DAC_READ_SEARCH CAP_KILL"}) || !slices.Equal(bound, got) {
		t.Errorf("got AmbientCapabilities=%q with CapabilityBoundingSet=%q, want CAP_DAC_READ_SEARCH CAP_KILL in both", got, bound)
	}
	if got := d["SupplementaryGroups"]; len(got) != 1 || got[0] == "" {
		t.Errorf("got SupplementaryGroups=%q, want the CRI socket's group", got)
	}
}
