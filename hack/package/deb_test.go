package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/testing/testruntime"
)

// evictdBin returns $EVICTD_BIN, or an evictd built as `make build` does.
func evictdBin(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("EVICTD_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "evictd")
	if err := testruntime.GoBuild("github.com/evictd/evictd/cmd/evictd", bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// buildPackages builds the .deb and .rpm of bin for this machine's
// architecture from the repository's packaging/nfpm.yaml.
func buildPackages(t *testing.T, bin string) (deb, rpm string) {
	t.Helper()
	written, err := build(options{
		root:    filepath.Join("..", ".."),
		config:  "packaging/nfpm.yaml",
		version: "v0.0.0-1-gabcdef0",
		arch:    runtime.GOARCH,
		bin:     bin,
		dist:    t.TempDir(),
		formats: []string{"deb", "rpm"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != 2 {
		t.Fatalf("got packages %q, want a .deb and an .rpm", written)
	}
	return written[0], written[1]
}

// TestPackages builds the .deb and the .rpm for this machine, then checks
// the .rpm (testRPM) and installs the .deb (testDebInstall).
func TestPackages(t *testing.T) {
	deb, rpm := buildPackages(t, evictdBin(t))
	t.Run("rpm", func(t *testing.T) { testRPM(t, rpm) })
	t.Run("deb", func(t *testing.T) { testDebInstall(t, deb) })
}

// testRPM checks the .rpm with rpm (hack/install-rpm.sh; required under
// CI=true): its files with their modes and owners, its config file and its
// digests; without rpm, by its lead's magic number.
func testRPM(t *testing.T, rpmPath string) {
	if want := "evictd-0.0.0+git1.gabcdef0-1." + map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[runtime.GOARCH] + ".rpm"; filepath.Base(rpmPath) != want {
		t.Errorf("got %s, want %s", filepath.Base(rpmPath), want)
	}
	if rpm, err := exec.LookPath("rpm"); err == nil {
		query := func(args ...string) string {
			t.Helper()
			out, err := exec.Command(rpm, append([]string{"-qp"}, append(args, rpmPath)...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("rpm -qp %v: %v\n%s", args, err, out)
			}
			return string(out)
		}
		// Each file with its mode and owner, as rpm will install it.
		files := query("--queryformat", "[%{FILEMODES:perms} %{FILEUSERNAME} %{FILENAMES}\n]")
		for _, want := range []string{
			"-rwxr-xr-x root /usr/bin/evictd",
			"-rw-r--r-- root /usr/lib/systemd/system/evictd.service",
			"drwx------ root /etc/evictd",
			"-rw------- root /etc/evictd/config.yaml",
			"-rw------- root /etc/evictd/evictd.env",
			"-rw-r--r-- root /usr/share/doc/evictd/examples/config.yaml",
			"-rw-r--r-- root /usr/share/bash-completion/completions/evictd",
			"-rw-r--r-- root /usr/share/zsh/site-functions/_evictd",
			"-rw-r--r-- root /usr/share/fish/vendor_completions.d/evictd.fish",
			"-rw-r--r-- root /usr/share/man/man8/evictd.8",
			"-rw-r--r-- root /usr/share/man/man8/evictd-check-config.8",
		} {
			if !strings.Contains(files, want+"\n") {
				t.Errorf("rpm's files:\n%s\nwant %q among them", files, want)
			}
		}
		// Kept on upgrade and removal: config files not replaced.
		if cfg := query("--configfiles"); !strings.Contains(cfg, "/etc/evictd/evictd.env\n") || !strings.Contains(cfg, "/etc/evictd/config.yaml\n") {
			t.Errorf("rpm's config files:\n%s\nwant /etc/evictd/config.yaml and /etc/evictd/evictd.env", cfg)
		}
		if out, err := exec.Command(rpm, "-K", "--nosignature", rpmPath).CombinedOutput(); err != nil || !strings.Contains(string(out), "digests OK") {
			t.Errorf("rpm -K: %v\n%s", err, out)
		}
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no rpm on PATH under CI=true: run hack/install-rpm.sh (as root)")
	}
	t.Logf("no rpm on PATH: checking the lead's magic only")
	f, err := os.Open(rpmPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var magic uint32
	if err := binary.Read(f, binary.BigEndian, &magic); err != nil {
		t.Fatal(err)
	}
	if magic != 0xedabeedb {
		t.Errorf("got magic %#x, want an RPM lead (0xedabeedb)", magic)
	}
}

// testDebInstall installs the .deb with dpkg on this machine and checks
// where everything lands, with which modes, that the binary runs and
// systemd-analyze verify accepts the units as installed, that nothing is
// enabled, that the installed binary reads the installed configuration
// file, and that dpkg -r removes the package but keeps an edited
// /etc/evictd/config.yaml and /etc/evictd/evictd.env, which a purge then
// removes. As root, on a
// machine where evictd is not installed; the package is purged at the end
// whatever happens.
func testDebInstall(t *testing.T, deb string) {
	if os.Geteuid() != 0 {
		t.Skip("dpkg -i needs root")
	}
	dpkg, err := exec.LookPath("dpkg")
	if err != nil {
		t.Skip("no dpkg on PATH (not a Debian-like machine)")
	}
	if exec.Command(dpkg, "-s", "evictd").Run() == nil {
		t.Skip("an evictd package is installed on this machine; the test would replace it")
	}
	for _, p := range []string{"/usr/bin/evictd", "/etc/evictd", "/usr/lib/systemd/system/evictd.service"} {
		if _, err := os.Lstat(p); err == nil {
			t.Skipf("%s exists on this machine; the test installs there and would remove it", p)
		}
	}
	if want := "evictd_0.0.0+git1.gabcdef0_" + runtime.GOARCH + ".deb"; filepath.Base(deb) != want {
		t.Errorf("got %s, want %s", filepath.Base(deb), want)
	}

	run := func(name string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	t.Cleanup(func() {
		out, err := exec.Command(dpkg, "--purge", "evictd").CombinedOutput()
		if err != nil {
			t.Errorf("cleanup: dpkg --purge evictd: %v\n%s", err, out)
		}
		// Did not exist before the test (checked above).
		if err := os.RemoveAll("/etc/evictd"); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	run(dpkg, "-i", deb)

	for path, mode := range map[string]os.FileMode{
		"/usr/bin/evictd":                                        0o755,
		"/usr/lib/systemd/system/evictd.service":                 0o644,
		"/usr/lib/systemd/system/evictd.socket":                  0o644,
		"/usr/lib/systemd/system-preset/90-evictd.preset":        0o644,
		"/usr/share/doc/evictd/LICENSE":                          0o644,
		"/usr/share/doc/evictd/CHANGELOG.md":                     0o644,
		"/usr/share/doc/evictd/examples/api-server.conf.example": 0o644,
		"/usr/share/doc/evictd/examples/own-user.conf.example":   0o644,
		"/usr/share/doc/evictd/examples/config.yaml":             0o644,
		"/usr/share/bash-completion/completions/evictd":          0o644,
		"/usr/share/zsh/vendor-completions/_evictd":              0o644,
		"/usr/share/fish/vendor_completions.d/evictd.fish":       0o644,
		"/usr/share/man/man8/evictd.8":                           0o644,
		"/usr/share/man/man8/evictd-doctor.8":                    0o644,
		"/etc/evictd":                                            0o700 | os.ModeDir,
		"/etc/evictd/config.yaml":                                0o600,
		"/etc/evictd/evictd.env":                                 0o600,
	} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Errorf("not installed: %v", err)
			continue
		}
		if fi.Mode()&(os.ModePerm|os.ModeDir) != mode {
			t.Errorf("%s: got mode %v, want %v", path, fi.Mode(), mode)
		}
	}
	// The drop-ins are examples only: none is active.
	if m, _ := filepath.Glob("/usr/lib/systemd/system/evictd.service.d/*"); len(m) > 0 {
		t.Errorf("got drop-ins %q, want none active", m)
	}
	preset, err := os.ReadFile("/usr/lib/systemd/system-preset/90-evictd.preset")
	if err == nil {
		for _, want := range []string{"disable evictd.service\n", "disable evictd.socket\n"} {
			if !bytes.Contains(preset, []byte(want)) {
				t.Errorf("preset: got\n%s\nwant a line %q", preset, strings.TrimSpace(want))
			}
		}
	}
	// Nothing enabled.
	if m, _ := filepath.Glob("/etc/systemd/system/*/evictd.*"); len(m) > 0 {
		t.Errorf("got %q, want evictd enabled nowhere", m)
	}
	if conffiles := run("dpkg-query", "-W", "-f=${Conffiles}", "evictd"); !strings.Contains(conffiles, "/etc/evictd/evictd.env ") || !strings.Contains(conffiles, "/etc/evictd/config.yaml ") {
		t.Errorf("dpkg-query conffiles: got %q, want /etc/evictd/config.yaml and /etc/evictd/evictd.env among them", conffiles)
	}

	if out := run("/usr/bin/evictd", "version"); strings.TrimSpace(out) == "" {
		t.Errorf("evictd version: got no output")
	}
	unit, err := os.ReadFile("/usr/lib/systemd/system/evictd.service")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(unit, []byte("\nExecStart=/usr/bin/evictd --config /etc/evictd/config.yaml $EVICTD_ARGS\n")) || bytes.Contains(unit, []byte("/usr/local/bin/evictd")) {
		t.Errorf("installed unit: got no ExecStart=/usr/bin/evictd --config /etc/evictd/config.yaml $EVICTD_ARGS, or /usr/local/bin/evictd still named")
	}
	// The installed binary reads the installed file, strictly and with
	// nothing deprecated.
	if out := run("/usr/bin/evictd", "check-config", "--config", "/etc/evictd/config.yaml", "--hostname-override=n1"); strings.Contains(out, "not valid strictly") || strings.Contains(out, "deprecated") {
		t.Errorf("evictd check-config --config /etc/evictd/config.yaml:\n%s", out)
	}
	if analyze, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Log("no systemd-analyze on PATH: units not verified")
	} else if problems := verify(t, analyze, "/usr/lib/systemd/system/evictd.service", "/usr/lib/systemd/system/evictd.socket"); len(problems) > 0 {
		t.Errorf("systemd-analyze verify: got problems, want none:\n%s", strings.Join(problems, "\n"))
	}

	edited := []byte("EVICTD_ARGS=--eviction-hard=memory.available<1Gi\n")
	if err := os.WriteFile("/etc/evictd/evictd.env", edited, 0o600); err != nil {
		t.Fatal(err)
	}
	editedCfg := []byte("apiVersion: config.evictd.io/v1alpha1\nkind: AgentConfiguration\ndryRun: true\n")
	if err := os.WriteFile("/etc/evictd/config.yaml", editedCfg, 0o600); err != nil {
		t.Fatal(err)
	}
	run(dpkg, "-r", "evictd")
	for _, p := range []string{"/usr/bin/evictd", "/usr/lib/systemd/system/evictd.service", "/usr/lib/systemd/system/evictd.socket", "/usr/lib/systemd/system-preset/90-evictd.preset"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s: still there after dpkg -r", p)
		}
	}
	if got, err := os.ReadFile("/etc/evictd/evictd.env"); err != nil || !bytes.Equal(got, edited) {
		t.Errorf("after dpkg -r: got env file %q (%v), want the edited one kept: %q", got, err, edited)
	}
	if got, err := os.ReadFile("/etc/evictd/config.yaml"); err != nil || !bytes.Equal(got, editedCfg) {
		t.Errorf("after dpkg -r: got config file %q (%v), want the edited one kept: %q", got, err, editedCfg)
	}
	if status := run("dpkg-query", "-W", "-f=${Status}", "evictd"); status != "deinstall ok config-files" {
		t.Errorf("after dpkg -r: got status %q, want %q", status, "deinstall ok config-files")
	}

	run(dpkg, "--purge", "evictd")
	for _, p := range []string{"/etc/evictd/evictd.env", "/etc/evictd/config.yaml"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s: still there after dpkg --purge", p)
		}
	}
}

// verify runs systemd-analyze verify on the units at paths and returns the
// problems it reports about them: verify exits 0 after mere warnings, so
// its output is read too (as systemd/unit_test.go does).
func verify(t *testing.T, analyze string, paths ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, analyze, append([]string{"verify", "--man=no"}, paths...)...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	var problems []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		about := false
		for _, p := range paths {
			about = about || strings.Contains(line, filepath.Base(p))
		}
		switch {
		case line == "":
		case about:
			problems = append(problems, line)
		default:
			t.Logf("systemd-analyze verify (not about the units): %s", line)
		}
	}
	if err != nil && len(problems) == 0 {
		problems = append(problems, "systemd-analyze verify: "+err.Error())
	}
	return problems
}
