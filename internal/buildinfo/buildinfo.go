package buildinfo

import "runtime/debug"

// Unknown is the version or revision of a build that does not say.
const Unknown = "unknown"

// Revision is linked when it is set (the -ldflags -X value of a release
// build), else the revision Go stamped from the VCS (go build in a
// checkout), with "-dirty" when the tree had changes, else Unknown.
func Revision(linked string) string {
	if linked != "" && linked != Unknown {
		return linked
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		return VCSRevision(bi.Settings)
	}
	return Unknown
}

// VCSRevision is vcs.revision, "-dirty" added when vcs.modified, or
// Unknown.
func VCSRevision(settings []debug.BuildSetting) string {
	rev, dirty := Unknown, false
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && rev != Unknown {
		rev += "-dirty"
	}
	return rev
}

// ModuleVersion is the module version the binary was built from, as the
// Go toolchain stamped it ("(devel)" for a plain local build), or Unknown.
func ModuleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return Unknown
}
