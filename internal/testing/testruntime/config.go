package testruntime

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The CRI plugin's section of containerd 1.6's version-2 config.
const criSection = `plugins."io.containerd.grpc.v1.cri"`

// The CRI plugins' sections of containerd 2's version-3 and version-4
// configs: the CRI split into a runtime plugin and an images plugin; the
// gRPC service keeps the old name for its server settings alone. In
// version 4 (containerd 2.4) the gRPC and ttrpc servers' settings moved from
// the top-level [grpc] and [ttrpc] into plugins of their own.
const (
	criRuntimeSection = `plugins.'io.containerd.cri.v1.runtime'`
	criImagesSection  = `plugins.'io.containerd.cri.v1.images'`
	grpcV4Section     = `plugins.'io.containerd.server.v1.grpc'`
	ttrpcV4Section    = `plugins.'io.containerd.server.v1.ttrpc'`
)

// daemonConfig is what the containerd config of one runtime sets over
// `containerd config default`.
type daemonConfig struct {
	root, state    string // containerd's root and state directories
	socket         string // the gRPC socket; ttrpc listens on socket+".ttrpc"
	cniDir         string // an empty directory tree for the CNI settings
	sandboxImage   string
	snapshotter    string
	statsPeriodSec int
	systemdCgroup  bool
	// shim is the path of containerd-shim-runc-v2 (the runc runtime's
	// runtime_path); "" for the one on PATH.
	shim string
	// promptGC: Options.PromptGC.
	promptGC bool
}

// settings returns the values to set, by TOML section and key, as TOML
// literals, for a default config of the given version (2: containerd 1.x,
// 3: containerd 2.0 to 2.3, 4: containerd 2.4). Every one of them must be present in the default
// config, so a containerd whose defaults moved is noticed instead of half
// configured.
func (c daemonConfig) settings(version int) map[string]map[string]string {
	var s map[string]map[string]string
	if version >= 3 {
		s = c.settingsV3(version)
	} else {
		s = c.settingsV2()
	}
	if c.shim != "" {
		runc := criSection + ".containerd.runtimes.runc"
		if version >= 3 {
			runc = criRuntimeSection + ".containerd.runtimes.runc"
		}
		s[runc] = map[string]string{"runtime_path": strconv.Quote(c.shim)}
	}
	if c.promptGC {
		gc := `plugins."io.containerd.gc.v1.scheduler"`
		if version >= 3 {
			gc = `plugins.'io.containerd.gc.v1.scheduler'`
		}
		s[gc] = map[string]string{"deletion_threshold": "1", "pause_threshold": "0.5"}
	}
	return s
}

// settingsV3 is settingsV2 in containerd 2's version-3 or version-4
// config: the same values under the CRI's new plugins (the sandbox image is
// the images plugin's pinned "sandbox" image, the CNI binaries a list) and,
// in version 4, the servers' plugins.
func (c daemonConfig) settingsV3(version int) map[string]map[string]string {
	q := strconv.Quote
	grpc, ttrpc := "grpc", "ttrpc"
	if version >= 4 {
		grpc, ttrpc = grpcV4Section, ttrpcV4Section
	}
	return map[string]map[string]string{
		"": {
			"root":  q(c.root),
			"state": q(c.state),
			// containerd 2.4's default imports the machine's
			// /etc/containerd/conf.d/*.toml; this containerd is the test's.
			"imports": "[]",
		},
		grpc:  {"address": q(c.socket)},
		ttrpc: {"address": q(c.socket + ".ttrpc")},
		criRuntimeSection: {
			"restrict_oom_score_adj":       "true",
			"disable_apparmor":             "true",
			"netns_mounts_under_state_dir": "true",
		},
		criImagesSection: {
			"snapshotter":          q(c.snapshotter),
			"stats_collect_period": strconv.Itoa(c.statsPeriodSec),
		},
		criImagesSection + ".pinned_images": {"sandbox": q(c.sandboxImage)},
		criRuntimeSection + ".cni": {
			"bin_dirs": "[" + q(filepath.Join(c.cniDir, "bin")) + "]",
			"conf_dir": q(filepath.Join(c.cniDir, "net.d")),
		},
		criRuntimeSection + ".containerd.runtimes.runc.options": {
			"Root":          q(filepath.Join(c.state, "runc")),
			"SystemdCgroup": strconv.FormatBool(c.systemdCgroup),
		},
		`plugins.'io.containerd.internal.v1.opt'`: {"path": q(filepath.Join(c.root, "opt"))},
		// NRI, on by default in containerd 2, listens on the machine's
		// /var/run/nri/nri.sock, which every test containerd would share.
		`plugins.'io.containerd.nri.v1.nri'`: {"disable": "true"},
	}
}

// settingsV2 is settings for containerd 1.6's version-2 config.
func (c daemonConfig) settingsV2() map[string]map[string]string {
	q := strconv.Quote // TOML basic strings accept Go's quoting of these values
	return map[string]map[string]string{
		"": {
			"root":  q(c.root),
			"state": q(c.state),
		},
		"grpc":  {"address": q(c.socket)},
		"ttrpc": {"address": q(c.socket + ".ttrpc")},
		criSection: {
			// runc's write of oom_score_adj -998 for the sandbox is refused
			// on machines of this kind; without this every sandbox fails.
			"restrict_oom_score_adj": "true",
			"sandbox_image":          q(c.sandboxImage),
			// No profiles are loaded here; containers ask for none.
			"disable_apparmor":             "true",
			"stats_collect_period":         strconv.Itoa(c.statsPeriodSec),
			"netns_mounts_under_state_dir": "true",
		},
		criSection + ".containerd": {"snapshotter": q(c.snapshotter)},
		// With no CNI config (Options.PodNetwork unset) the runtime reports
		// NetworkReady=false, which hostNetwork sandboxes ignore.
		criSection + ".cni": {
			"bin_dir":  q(filepath.Join(c.cniDir, "bin")),
			"conf_dir": q(filepath.Join(c.cniDir, "net.d")),
		},
		// runc's own state (runc --root) under this runtime's state
		// directory, not the machine's /run/containerd/runc.
		criSection + ".containerd.runtimes.runc.options": {
			"Root":          q(filepath.Join(c.state, "runc")),
			"SystemdCgroup": strconv.FormatBool(c.systemdCgroup),
		},
		`plugins."io.containerd.internal.v1.opt"`: {"path": q(filepath.Join(c.root, "opt"))},
	}
}

// render rewrites the default config (the output of `containerd config
// default`) with c's settings, line by line: section headers are tracked and
// `key = value` lines of a wanted key in a wanted section get the new value.
// It fails if a setting has no line to replace. The settings are those of
// the defaults' schema, their `version = N` line (none: 2, as before
// containerd 2).
func (c daemonConfig) render(defaults string) (string, error) {
	version, err := configVersion(defaults)
	if err != nil {
		return "", err
	}
	want := c.settings(version)
	done := map[string]bool{}
	var out strings.Builder
	section := ""
	sc := bufio.NewScanner(strings.NewReader(defaults))
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "[") && strings.HasSuffix(trimmed, "]") {
			section = strings.Trim(trimmed, "[]")
		} else if key, _, ok := strings.Cut(trimmed, "="); ok {
			key = strings.TrimSpace(key)
			if v, ok := want[section][key]; ok {
				indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
				line = indent + key + " = " + v
				done[section+"\x00"+key] = true
			}
		}
		out.WriteString(line)
		out.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	for section, kv := range want {
		for key := range kv {
			if !done[section+"\x00"+key] {
				return "", fmt.Errorf("`containerd config default` has no %q in section [%s]", key, section)
			}
		}
	}
	return out.String(), nil
}

// configVersion returns the version of a containerd config: its top-level
// `version = N` line, 2 without one; 2 (containerd 1.6), 3 (containerd 2.0
// to 2.3) and 4 (containerd 2.4) are understood.
func configVersion(cfg string) (int, error) {
	sc := bufio.NewScanner(strings.NewReader(cfg))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			break
		}
		if key, v, ok := strings.Cut(line, "="); ok && strings.TrimSpace(key) == "version" {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n < 2 || n > 4 {
				return 0, fmt.Errorf("containerd config version %q: want 2, 3 or 4", strings.TrimSpace(v))
			}
			return n, nil
		}
	}
	return 2, sc.Err()
}

// write runs `containerd config default` with the containerd binary bin,
// applies c and writes the result to path. It returns the config's version.
func (c daemonConfig) write(bin, path string) (int, error) {
	defaults, err := runCommand(bin, "config", "default")
	if err != nil {
		return 0, err
	}
	version, err := configVersion(defaults)
	if err != nil {
		return 0, err
	}
	cfg, err := c.render(defaults)
	if err != nil {
		return 0, err
	}
	for _, d := range []string{filepath.Join(c.cniDir, "bin"), filepath.Join(c.cniDir, "net.d")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return 0, err
		}
	}
	return version, os.WriteFile(path, []byte(cfg), 0o644)
}
