package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestPkgVersion(t *testing.T) {
	tests := []struct {
		describe, want string
	}{
		{"v1.2.3", "1.2.3"},
		{"1.2.3", "1.2.3"},
		{"v1.2.3-dirty", "1.2.3+dirty"},
		{"v1.2.3-rc.1", "1.2.3~rc.1"},
		{"v1.2.3-rc.1-dirty", "1.2.3~rc.1+dirty"},
		{"v1.2.3-4-gabcdef0", "1.2.3+git4.gabcdef0"},
		{"v1.2.3-4-gabcdef0-dirty", "1.2.3+git4.gabcdef0.dirty"},
		{"v1.2.3-rc.1-2-gabcdef0", "1.2.3~rc.1+git2.gabcdef0"},
		// The Makefile's version before the first tag.
		{"v0.0.0-301-gbced73b", "0.0.0+git301.gbced73b"},
		{"v0.0.0-301-gbced73b-dirty", "0.0.0+git301.gbced73b.dirty"},
	}
	for _, tt := range tests {
		t.Run(tt.describe, func(t *testing.T) {
			got, err := pkgVersion(tt.describe)
			if err != nil {
				t.Fatalf("got error %v, want %q", err, tt.want)
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	for _, bad := range []string{"", "dev", "bced73b", "bced73b-dirty", "v1.2", "v1.2.3-4-gXYZ", "v1.2.3 ", "v1.2.3-a_b"} {
		if got, err := pkgVersion(bad); err == nil {
			t.Errorf("pkgVersion(%q): got %q, want an error", bad, got)
		}
	}
}

// TestPkgVersionOrder checks with dpkg that the packages' versions sort in
// git's order: pre-releases before their release, commits after their tag.
func TestPkgVersionOrder(t *testing.T) {
	dpkg, err := exec.LookPath("dpkg")
	if err != nil {
		t.Skip("no dpkg on PATH to compare versions")
	}
	order := []string{"v0.0.0-9-gfff0000", "v0.0.0-10-g0000000", "v1.2.3-rc.1", "v1.2.3-rc.1-2-gabcdef0", "v1.2.3", "v1.2.3-4-gabcdef0", "v1.2.3-4-gabcdef0-dirty", "v1.2.3-5-g0123456", "v1.2.4-rc.1"}
	for i := 1; i < len(order); i++ {
		a, _ := pkgVersion(order[i-1])
		b, _ := pkgVersion(order[i])
		if err := exec.Command(dpkg, "--compare-versions", a, "lt", b).Run(); err != nil {
			t.Errorf("dpkg --compare-versions %s lt %s (%s, %s): %v, want true", a, b, order[i-1], order[i], err)
		}
	}
}

// TestPackagedUnit checks the rewrite of the repository's unit: its one
// ExecStart runs /usr/bin/evictd with the same arguments, and nothing else
// changes.
func TestPackagedUnit(t *testing.T) {
	unit, err := os.ReadFile(filepath.Join("..", "..", "systemd", "evictd.service"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := packagedUnit(unit)
	if err != nil {
		t.Fatal(err)
	}
	var execs []string
	for _, line := range strings.Split(string(got), "\n") {
		if strings.HasPrefix(line, "ExecStart") {
			execs = append(execs, line)
		}
	}
	if want := "ExecStart=/usr/bin/evictd --config /etc/evictd/config.yaml $EVICTD_ARGS"; len(execs) != 1 || execs[0] != want {
		t.Errorf("got ExecStart lines %q, want [%q]", execs, want)
	}
	back := bytes.Replace(got, []byte("ExecStart=/usr/bin/evictd "), []byte("ExecStart=/usr/local/bin/evictd "), 1)
	if !bytes.Equal(back, unit) {
		t.Errorf("the packaged unit differs from systemd/evictd.service beyond ExecStart")
	}

	for _, bad := range []string{
		"[Service]\nExecStart=/usr/bin/true\n",
		"[Service]\nExecStart=/usr/local/bin/evictd $EVICTD_ARGS\nExecStart=/usr/local/bin/evictd --x\n",
	} {
		if _, err := packagedUnit([]byte(bad)); err == nil {
			t.Errorf("packagedUnit(%q): got no error, want one", bad)
		}
	}
}
