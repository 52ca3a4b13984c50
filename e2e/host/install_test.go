package host

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestMakeInstall runs `make install` into a scratch root twice and checks
// that the binary, unit, configuration file and environment file land
// where systemd expects them, that /etc/evictd, where the credentials go,
// is root's alone (0700, also when it existed with a looser mode), and
// that an operator's edited configuration and environment files are never
// overwritten; then into a root an older make install left with an
// environment file only (its flags), which is kept while the configuration
// file the unit names is added.
func TestMakeInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	makeBin, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make on PATH")
	}
	root := t.TempDir()
	install := func() {
		t.Helper()
		cmd := exec.Command(makeBin, "-C", filepath.Join("..", ".."), "install", "DESTDIR="+root)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make install: %v\n%s", err, out)
		}
	}
	install()
	for path, mode := range map[string]os.FileMode{
		"usr/local/bin/evictd":                                        0o755,
		"etc/systemd/system/evictd.service":                           0o644,
		"etc/systemd/system/evictd.socket":                            0o644,
		"etc/systemd/system/evictd.service.d/api-server.conf.example": 0o644,
		"etc/systemd/system/evictd.service.d/own-user.conf.example":   0o644,
		"etc/evictd":             0o700,
		"etc/evictd/evictd.env":  0o600,
		"etc/evictd/config.yaml": 0o600,
	} {
		fi, err := os.Stat(filepath.Join(root, path))
		if err != nil {
			t.Errorf("not installed: %v", err)
			continue
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode().Perm(), mode)
		}
	}

	env, cfg := filepath.Join(root, "etc/evictd/evictd.env"), filepath.Join(root, "etc/evictd/config.yaml")
	edited := []byte("EVICTD_ARGS=--eviction-hard=memory.available<1Gi\n")
	if err := os.WriteFile(env, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	editedCfg := []byte("apiVersion: config.evictd.io/v1alpha1\nkind: AgentConfiguration\ndryRun: true\n")
	if err := os.WriteFile(cfg, editedCfg, 0o600); err != nil {
		t.Fatal(err)
	}
	// An /etc/evictd made by hand, or by an older make install (0755).
	etc := filepath.Join(root, "etc/evictd")
	if err := os.Chmod(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	install()
	if fi, err := os.Stat(etc); err != nil {
		t.Error(err)
	} else if fi.Mode().Perm() != 0o700 {
		t.Errorf("etc/evictd after a second make install: got mode %v, want 0700", fi.Mode().Perm())
	}
	got, err := os.ReadFile(env)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(edited) {
		t.Errorf("second make install overwrote the operator's env file:\ngot  %q\nwant %q", got, edited)
	}
	if got, err := os.ReadFile(cfg); err != nil || string(got) != string(editedCfg) {
		t.Errorf("second make install overwrote the operator's config.yaml: got %q (%v), want %q", got, err, editedCfg)
	}

	// An older install: the environment file held every flag, and there
	// was no configuration file.
	if err := os.Remove(cfg); err != nil {
		t.Fatal(err)
	}
	install()
	if got, err := os.ReadFile(env); err != nil || string(got) != string(edited) {
		t.Errorf("make install over an older install overwrote its env file: got %q (%v)", got, err)
	}
	shipped, err := os.ReadFile(filepath.Join("..", "..", "systemd", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(cfg); err != nil || string(got) != string(shipped) {
		t.Errorf("make install over an older install: config.yaml %q (%v), want systemd/config.yaml", got, err)
	}
}
