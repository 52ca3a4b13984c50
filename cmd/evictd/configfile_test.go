package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/evictd/evictd/internal/config"
)

// TestAgentFlagsHaveFileFields: every flag `evictd --help` lists, those
// cmd/evictd adds included, has a field in evictd's configuration file or
// is command-line-only with a reason.
func TestAgentFlagsHaveFileFields(t *testing.T) {
	out, _, code := runCmd("--help")
	if code != 0 {
		t.Fatalf("evictd --help: exit %d", code)
	}
	flags := regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9-]+)`).FindAllStringSubmatch(out, -1)
	if len(flags) < 60 {
		t.Fatalf("found %d flags in evictd --help, want every agent flag:\n%s", len(flags), out)
	}
	for _, m := range flags {
		_, field := config.FileField(m[1])
		_, cli := config.CommandLineOnly(m[1])
		if !field && !cli {
			t.Errorf("--%s has no field in evictd's configuration file and is not listed as command-line-only (internal/config/fields.go)", m[1])
		}
	}
}

const agentHeader = "apiVersion: config.evictd.io/v1alpha1\nkind: AgentConfiguration\n"

// TestCheckConfigReadsConfigFile: check-config takes the settings from
// evictd's own file and its drop-ins, under the command line's flags.
func TestCheckConfigReadsConfigFile(t *testing.T) {
	dir := t.TempDir()
	cfg, drop := filepath.Join(dir, "config.yaml"), filepath.Join(dir, "config.d")
	if err := os.Mkdir(drop, 0o755); err != nil {
		t.Fatal(err)
	}
	for p, text := range map[string]string{
		cfg:                            agentHeader + "evictionHard:\n  memory.available: 700Mi\n  nodefs.available: \"12%\"\nhostnameOverride: n1\n",
		filepath.Join(drop, "10.conf"): agentHeader + "evictionHard:\n  nodefs.available: \"13%\"\n",
	} {
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := runCmd("check-config", "--config", cfg, "--config-dir", drop)
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	src := "evictionHard in " + cfg + " + evictionHard in " + filepath.Join(drop, "10.conf")
	for _, w := range []string{"700Mi", "13%", src} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	out, errOut, code = runCmd("check-config", "--config", cfg, "--config-dir", drop, "--eviction-hard=memory.available<1Gi")
	if code != 0 || !strings.Contains(out, "1Gi") || strings.Contains(out, "700Mi") ||
		!strings.Contains(errOut, "note: "+src+" is overridden by --eviction-hard.") {
		t.Errorf("the flag over the files: exit %d\n%s\n%s", code, out, errOut)
	}
	_, errOut, code = runCmd("check-config", "--config", filepath.Join(dir, "none.yaml"))
	if code != 1 || !strings.Contains(errOut, "read --config file: open "+filepath.Join(dir, "none.yaml")) {
		t.Errorf("a missing --config: exit %d, stderr %q", code, errOut)
	}
}

// TestKubeletConfigurationAsConfigIsDeprecated: a KubeletConfiguration
// given to --config is still imported, with a warning naming
// --import-kubelet-config, in check-config's output and in the agent's
// log at start.
func TestKubeletConfigurationAsConfigIsDeprecated(t *testing.T) {
	dir := t.TempDir()
	kubelet := filepath.Join(dir, "kubelet.yaml")
	if err := os.WriteFile(kubelet, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard:\n  memory.available: 300Mi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "--config " + kubelet + " is a KubeletConfiguration: evictd imported its eviction settings as before, but a KubeletConfiguration given to --config is deprecated: give it as --import-kubelet-config " + kubelet
	out, errOut, code := runCmd("check-config", "--hostname-override=n1", "--config", kubelet)
	if code != 0 || !strings.Contains(errOut, "warning: "+want) || !strings.Contains(out, "300Mi") {
		t.Errorf("check-config: exit %d, stdout:\n%s\nstderr:\n%s\nwant the thresholds and the warning %q", code, out, errOut, want)
	}
	out, errOut, _ = runCmd("check-config", "--hostname-override=n1", "--import-kubelet-config", kubelet)
	if strings.Contains(out+errOut, "deprecated") || !strings.Contains(out, "300Mi") {
		t.Errorf("--import-kubelet-config: got\n%s\nwant the thresholds without a deprecation", out)
	}

	// The agent logs it at start; an open kubeconfig then stops it.
	open := kubeconfigFor(t, filepath.Join(dir, "kubeconfig"), &clientcmdapi.AuthInfo{Token: "t0ken"}, nil, 0o644)
	_, errOut, code = runCmd("--config", kubelet, "--hostname-override=n1", "--kubeconfig", open,
		"--metrics-bind-address=127.0.0.1:0", "--container-runtime-endpoint=unix:///nonexistent/evictd-test.sock")
	if code != 1 || !regexp.MustCompile(`level=WARN msg="`+regexp.QuoteMeta(strings.ReplaceAll(want, `"`, `\"`))).MatchString(errOut) {
		t.Errorf("the agent: exit %d, stderr:\n%s\nwant a WARN line %q", code, errOut, want)
	}
}

// TestCheckConfigSaysWhereEachValueCameFrom: check-config's document gives
// each setting not derived from others its source: the default, the
// configuration file's field, or the flag.
func TestCheckConfigSaysWhereEachValueCameFrom(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte("apiVersion: config.evictd.io/v1alpha1\nkind: AgentConfiguration\nmaxEvictionsPerHour: 30\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCmd("check-config", "--hostname-override=n1", "--config", cfg, "--dry-run", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	var doc struct {
		Settings []settingDoc `json:"settings"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"max-evictions-per-hour": "maxEvictionsPerHour in " + cfg, "dry-run": "--dry-run", "log-level": "default"}
	for _, s := range doc.Settings {
		if w, ok := want[s.Name]; ok && s.Source != w {
			t.Errorf("%s: source %q, want %q", s.Name, s.Source, w)
		}
		if (s.Source == "") != (len(s.DerivedFrom) > 0) {
			t.Errorf("%s: source %q with derivedFrom %q: want a source exactly where it is not derived", s.Name, s.Source, s.DerivedFrom)
		}
	}
}
