package buildinfo

import (
	"regexp"
	"runtime/debug"
	"testing"
)

func TestVCSRevision(t *testing.T) {
	rev := "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		name     string
		settings []debug.BuildSetting
		want     string
	}{
		{"no VCS", []debug.BuildSetting{{Key: "GOOS", Value: "linux"}}, "unknown"},
		{"clean", []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}}, rev},
		{"dirty", []debug.BuildSetting{{Key: "vcs.modified", Value: "true"}, {Key: "vcs.revision", Value: rev}}, rev + "-dirty"},
		{"modified without revision", []debug.BuildSetting{{Key: "vcs.modified", Value: "true"}}, "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := VCSRevision(tc.settings); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRevision(t *testing.T) {
	if got := Revision("abc123"); got != "abc123" {
		t.Errorf("linked abc123: got %q", got)
	}
	// A test binary has no VCS stamp: unknown, or a revision when the
	// toolchain stamped one.
	for _, linked := range []string{"", Unknown} {
		if got := Revision(linked); !regexp.MustCompile(`^([0-9a-f]+(-dirty)?|unknown)$`).MatchString(got) {
			t.Errorf("linked %q: got %q, want the stamped revision or unknown", linked, got)
		}
	}
}
