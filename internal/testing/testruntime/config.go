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
}

// settings returns the values to set, by TOML section and key, as TOML
// literals. Every one of them must be present in the default config, so a
// containerd whose defaults moved is noticed instead of half configured.
func (c daemonConfig) settings() map[string]map[string]string {
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
// It fails if a setting has no line to replace.
func (c daemonConfig) render(defaults string) (string, error) {
	want := c.settings()
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

// write runs `containerd config default`, applies c and writes the
// result to path.
func (c daemonConfig) write(path string) error {
	defaults, err := runCommand("containerd", "config", "default")
	if err != nil {
		return err
	}
	cfg, err := c.render(defaults)
	if err != nil {
		return err
	}
	for _, d := range []string{filepath.Join(c.cniDir, "bin"), filepath.Join(c.cniDir, "net.d")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return os.WriteFile(path, []byte(cfg), 0o644)
}
