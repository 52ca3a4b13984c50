package systemd

import (
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/evictd/evictd/internal/config"
	"github.com/evictd/evictd/thresholds"
)

const (
	envFile = "evictd.env"
	// configFile is installed as /etc/evictd/config.yaml, which the
	// unit's ExecStart names.
	configFile          = "config.yaml"
	installedConfigFile = "/etc/evictd/config.yaml"
)

// envArgs reads EVICTD_ARGS from the environment file and splits it the way
// systemd splits an unbraced $EVICTD_ARGS in ExecStart: on whitespace. As
// shipped the file holds comments only, so there are none; the value is
// read by sourcing the file in bash, which gives what systemd's
// EnvironmentFile parser gives for a file of comments and blank lines.
func envArgs(t *testing.T) (args []string, comments string) {
	t.Helper()
	data, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatalf("read %s: %v", envFile, err)
	}
	var cs []string
	for n, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "#"):
			if strings.HasSuffix(line, `\`) {
				t.Errorf("%s:%d: comment ends in a backslash; systemd would continue it onto the next line", envFile, n+1)
			}
			cs = append(cs, line)
		case strings.TrimSpace(line) == "":
		default:
			t.Errorf("%s:%d: got %q, want comments only: the settings are in %s", envFile, n+1, line, installedConfigFile)
		}
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not installed")
	}
	cmd := exec.CommandContext(t.Context(), bash, "-c", `set -a; . "./$1"; printf %s "$EVICTD_ARGS"`, "bash", envFile)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("source %s: %v\n%s", envFile, err, out)
	}
	return strings.Fields(string(out)), strings.Join(cs, "\n")
}

// unitArgs returns the arguments of the unit's ExecStart, with the
// shipped files in place of the installed ones: the configuration file
// this directory's, $EVICTD_ARGS the environment file's.
func unitArgs(t *testing.T) []string {
	t.Helper()
	execs := unitSettings(t, unitFile)["Service"]["ExecStart"]
	if len(execs) != 1 {
		t.Fatalf("got ExecStart=%q, want one", execs)
	}
	env, _ := envArgs(t)
	var args []string
	for _, a := range strings.Fields(execs[0])[1:] {
		switch a {
		case installedConfigFile:
			args = append(args, configFile)
		case "$EVICTD_ARGS":
			args = append(args, env...)
		default:
			args = append(args, a)
		}
	}
	return args
}

// shipped completes the configuration the unit starts evictd with, as
// shipped.
func shipped(t *testing.T) *config.Config {
	t.Helper()
	args := unitArgs(t)
	fs, opts := config.NewFlagSet("evictd")
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse the unit's arguments %q: %v", args, err)
	}
	if rest := fs.Args(); len(rest) > 0 {
		t.Errorf("got stray arguments %q, want only flags", rest)
	}
	cfg, err := opts.Complete(fs)
	if err != nil {
		t.Fatalf("complete the unit's arguments %q: %v", args, err)
	}
	return cfg
}

// TestShippedConfigParses runs the unit's arguments through evictd's own
// flag set and configuration checks, so the shipped defaults start an
// agent; the file is read strictly, with nothing deprecated.
func TestShippedConfigParses(t *testing.T) {
	if args := unitArgs(t); !slices.Equal(args[:2], []string{"--config", configFile}) {
		t.Errorf("the unit runs evictd with %q, want --config %s first", args, installedConfigFile)
	}
	cfg := shipped(t)
	if cfg.ConfigFile != configFile || cfg.Lenient != nil || cfg.Deprecations != nil {
		t.Errorf("config file %q, lenient decodings %+v, deprecations %q: want %s read strictly", cfg.ConfigFile, cfg.Lenient, cfg.Deprecations, configFile)
	}
}

// TestShippedConfigDefaults checks the values the file promises, and
// that they come from the file.
func TestShippedConfigDefaults(t *testing.T) {
	values := map[string]string{}
	hard := map[string]string{}
	for _, s := range shipped(t).Provenance() {
		if s.Source.Kind == config.SourceConfigFile {
			values[s.Name] = s.Value
			if s.Name == "evictionHard" {
				hard[s.Key] = s.Value
			}
		}
	}
	// evictionHard is the kubelet's Linux default, written out.
	if want := thresholds.DefaultHard(); !maps.Equal(hard, want) {
		t.Errorf("got evictionHard %v, want the kubelet defaults %v", hard, want)
	}
	for name, want := range map[string]string{
		"metricsBindAddress": "127.0.0.1:9847", // loopback
		"kubeconfig":         "/etc/evictd/kubeconfig",
		// The package does not write the kubeconfig: until the operator
		// has, the agent starts standalone instead of restarting in a loop.
		"kubeconfigOptional":     "true",
		"standaloneStop":         "true",
		"rootDir":                "/var/lib/kubelet",
		"cgroupDriver":           "systemd",
		"enforceNodeAllocatable": "pods",
	} {
		if got := values[name]; got != want {
			t.Errorf("got %s %q from %s, want %q", name, got, configFile, want)
		}
	}
	if _, ok := values["dryRun"]; ok {
		t.Error("got dryRun in the defaults, want it documented but off")
	}
}

// TestShippedConfigExplainsEverySetting checks that each setting the file
// sets has a comment just above it, and that each setting a comment
// names exists.
func TestShippedConfigExplainsEverySetting(t *testing.T) {
	data, err := os.ReadFile(configFile)
	if err != nil {
		t.Fatal(err)
	}
	names := fileFields()
	lines := strings.Split(string(data), "\n")
	for i, line := range lines {
		m := regexp.MustCompile(`^([A-Za-z]+):`).FindStringSubmatch(line)
		if m == nil || m[1] == "apiVersion" || m[1] == "kind" {
			continue
		}
		if !names[m[1]] {
			t.Errorf("%s:%d: %s is no setting of evictd's", configFile, i+1, m[1])
		}
		if i == 0 || !strings.HasPrefix(lines[i-1], "#") {
			t.Errorf("%s:%d: %s without a comment above it explaining it", configFile, i+1, m[1])
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^#\s+([a-z][A-Za-z]+): `).FindAllStringSubmatch(string(data), -1) {
		if !names[m[1]] {
			t.Errorf("the comments of %s name %s, which is no setting of evictd's", configFile, m[1])
		}
	}
}

// fileFields returns the names of the fields of evictd's configuration
// file.
func fileFields() map[string]bool {
	names := map[string]bool{}
	fs, _ := config.NewFlagSet("evictd")
	fs.VisitAll(func(f *pflag.Flag) {
		if name, ok := config.FileField(f.Name); ok {
			names[name] = true
		}
	})
	return names
}

// TestEnvFileIsEmpty checks that the environment file sets nothing as
// shipped, and that the flags its comments show exist.
func TestEnvFileIsEmpty(t *testing.T) {
	args, comments := envArgs(t)
	if len(args) > 0 {
		t.Errorf("got EVICTD_ARGS %q, want none: the settings are in %s", args, configFile)
	}
	if !strings.Contains(comments, installedConfigFile) {
		t.Errorf("the comments of %s do not say the settings are in %s", envFile, installedConfigFile)
	}
	fs, _ := config.NewFlagSet("evictd")
	for _, m := range regexp.MustCompile(`[\s"]--([a-z0-9-]+)`).FindAllStringSubmatch(comments, -1) {
		if fs.Lookup(m[1]) == nil {
			t.Errorf("the comments of %s show --%s, which evictd does not have", envFile, m[1])
		}
	}
}
