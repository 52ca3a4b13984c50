package systemd

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	unitFile = "evictd.service"
	// installedBinary is where `make install` puts evictd; ExecStart names it.
	installedBinary = "/usr/local/bin/evictd"
)

// unitSettings parses a unit file into section → key → values, in order.
// It handles what evictd.service uses: sections, comments, Key=Value lines.
func unitSettings(t *testing.T, path string) map[string]map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open unit: %v", err)
	}
	defer f.Close()
	out := map[string]map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
			out[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not a Key=Value line in a section: %q", path, n, line)
			}
			out[section][k] = append(out[section][k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read unit: %v", err)
	}
	return out
}

// TestUnitSettings checks the settings evictd depends on: notify protocol,
// watchdog, restarts, the agent's own protection, and a sandbox that still
// lets it read the node and reach the runtime and the API server.
func TestUnitSettings(t *testing.T) {
	u := unitSettings(t, unitFile)
	tests := []struct {
		section, key string
		want         []string
	}{
		{"Unit", "Wants", []string{"network-online.target"}},
		{"Unit", "After", []string{"containerd.service", "crio.service", "kubelet.service", "network-online.target"}},
		{"Unit", "StartLimitIntervalSec", []string{"0"}},
		{"Service", "Type", []string{"notify"}},
		{"Service", "NotifyAccess", []string{"main"}},
		{"Service", "EnvironmentFile", []string{"-/etc/evictd/evictd.env"}},
		{"Service", "ExecStart", []string{installedBinary + " --config /etc/evictd/config.yaml $EVICTD_ARGS"}},
		{"Service", "WatchdogSec", []string{"30s"}},
		{"Service", "Restart", []string{"always"}},
		{"Service", "RestartSec", []string{"2s"}},
		{"Service", "OOMScoreAdjust", []string{"-999"}},
		{"Service", "MemoryMin", []string{"32M"}},
		{"Service", "MemoryLow", []string{"64M"}},
		{"Service", "MemoryMax", []string{"256M"}},
		{"Service", "LimitNOFILE", []string{"1024"}},
		{"Service", "TasksMax", []string{"512"}},
		{"Service", "Environment", []string{"GOMEMLIMIT=192MiB", "GOGC=50"}},
		{"Service", "CapabilityBoundingSet", []string{"CAP_DAC_READ_SEARCH CAP_KILL"}},
		{"Service", "ProtectSystem", []string{"strict"}},
		{"Service", "StateDirectory", []string{"evictd"}},
		{"Service", "StateDirectoryMode", []string{"0700"}},
		{"Service", "ProtectHome", []string{"true"}},
		{"Service", "PrivateTmp", []string{"true"}},
		{"Service", "NoNewPrivileges", []string{"true"}},
		{"Service", "ProtectControlGroups", []string{"true"}},
		{"Service", "RestrictAddressFamilies", []string{"AF_UNIX AF_INET AF_INET6 AF_NETLINK"}},
		{"Service", "IPAddressDeny", []string{"any"}},
		{"Service", "IPAddressAllow", []string{"localhost"}},
		{"Service", "SocketBindDeny", []string{"any"}},
		{"Service", "MemoryDenyWriteExecute", []string{"true"}},
		{"Service", "SystemCallArchitectures", []string{"native"}},
	}
	for _, tt := range tests {
		t.Run(tt.section+"/"+tt.key, func(t *testing.T) {
			got := u[tt.section][tt.key]
			for _, want := range tt.want {
				if !slices.Contains(got, want) {
					t.Errorf("got %s=%q, want %q among them", tt.key, got, want)
				}
			}
		})
	}
	// kubelet is ordered against, never pulled in or bound to: restarting
	// the kubelet must not restart evictd. Nor is either container
	// runtime: evictd starts after whichever the node has, and pulling in
	// one would start containerd on a CRI-O node (or the reverse).
	for _, k := range []string{"Wants", "Requires", "BindsTo", "PartOf", "Requisite", "Upholds"} {
		for _, unit := range []string{"kubelet.service", "containerd.service", "crio.service"} {
			if slices.Contains(u["Unit"][k], unit) {
				t.Errorf("got %s=%s, want evictd independent of that unit's lifecycle", k, unit)
			}
		}
	}
	// Settings left out on purpose (see the unit's comments).
	for _, k := range []string{"User", "DynamicUser", "ProtectProc", "ProcSubset", "PrivateDevices", "PrivateNetwork", "SecureBits"} {
		if v, ok := u["Service"][k]; ok {
			t.Errorf("got %s=%q, want it unset", k, v)
		}
	}
}

// verifiable copies the unit into a temp dir with ExecStart pointing at a
// binary that exists here, since systemd-analyze verify checks it.
func verifiable(t *testing.T, extra string) string {
	t.Helper()
	data, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatalf("read unit: %v", err)
	}
	stand := "/bin/true"
	if _, err := os.Stat(stand); err != nil {
		if stand, err = os.Executable(); err != nil {
			t.Fatalf("find an executable for ExecStart: %v", err)
		}
	}
	re := regexp.MustCompile(`(?m)^ExecStart=` + regexp.QuoteMeta(installedBinary) + ` `)
	if n := len(re.FindAllIndex(data, -1)); n != 1 {
		t.Fatalf("got %d ExecStart=%s lines, want 1", n, installedBinary)
	}
	text := re.ReplaceAllLiteralString(string(data), "ExecStart="+stand+" ")
	text = strings.Replace(text, "[Service]\n", "[Service]\n"+extra, 1)
	path := filepath.Join(t.TempDir(), unitFile)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatalf("write unit copy: %v", err)
	}
	return path
}

func systemdAnalyze(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	return p
}

// verify runs systemd-analyze verify on the units at paths and returns the
// problems it reports about them. verify exits 0 after mere warnings (an
// unknown key, a malformed value), so its output is read too.
func verify(t *testing.T, analyze string, paths ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, analyze, append([]string{"verify", "--man=no"}, paths...)...).CombinedOutput()
	about := func(line string) bool {
		for _, p := range paths {
			if strings.Contains(line, p) || strings.Contains(line, filepath.Base(p)) {
				return true
			}
		}
		return false
	}
	var problems []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		switch {
		case line == "":
		case about(line):
			problems = append(problems, line)
		default:
			t.Logf("systemd-analyze verify (not about the unit): %s", line)
		}
	}
	if err != nil && len(problems) == 0 {
		problems = append(problems, "systemd-analyze verify: "+err.Error())
	}
	return problems
}

func TestUnitVerifies(t *testing.T) {
	analyze := systemdAnalyze(t)
	if problems := verify(t, analyze, verifiable(t, "")); len(problems) > 0 {
		t.Errorf("got problems, want none:\n%s", strings.Join(problems, "\n"))
	}
}

// TestVerifyCatchesMistakes makes sure the check above can fail.
func TestVerifyCatchesMistakes(t *testing.T) {
	analyze := systemdAnalyze(t)
	for _, bad := range []string{"WatchdogSec=thirty\n", "Frobnicate=yes\n"} {
		if problems := verify(t, analyze, verifiable(t, bad)); len(problems) == 0 {
			t.Errorf("got no problems with %q added, want some", strings.TrimSpace(bad))
		}
	}
}

// maxExposure is the exposure systemd-analyze security gives the unit (2.1,
// "OK" on systemd 252; 2.0 before CAP_KILL, 2.2 before IPAddressDeny=):
// what is left is what evictd needs (root's uid for root-owned files and
// the CRI socket, CAP_DAC_READ_SEARCH for pods' volumes, CAP_KILL for a
// hard eviction's own stop signal, the host's network and /proc,
// block devices for filesystem discovery; see the comments in the unit). A
// change that loosens the sandbox raises the score and fails
// TestUnitSecurity.
const maxExposure = 2.1

// exposure runs systemd-analyze security offline on the unit at path and
// returns its overall exposure and the lines of the settings it counts
// against the unit. It skips where this systemd-analyze cannot review a
// unit file offline (before systemd 250).
func exposure(t *testing.T, analyze, path string) (float64, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, analyze, "security", "--offline=yes", path).CombinedOutput()
	text := string(out)
	if err != nil && (strings.Contains(text, "unrecognized option") || strings.Contains(text, "Unknown command")) {
		t.Skipf("this systemd-analyze cannot review a unit file offline (--offline needs systemd 250 or later): %s", strings.TrimSpace(text))
	}
	if err != nil {
		t.Fatalf("systemd-analyze security --offline=yes %s: %v\n%s", path, err, text)
	}
	m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9]+\.[0-9]+)`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("systemd-analyze security printed no overall exposure level:\n%s", text)
	}
	score, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatalf("exposure level %q: %v", m[1], err)
	}
	var against []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, "✗") {
			against = append(against, strings.TrimRight(line, " "))
		}
	}
	return score, against
}

// TestUnitSecurity holds the unit's exposure, as systemd-analyze security
// rates it, at or below maxExposure.
func TestUnitSecurity(t *testing.T) {
	analyze := systemdAnalyze(t)
	score, against := exposure(t, analyze, verifiable(t, ""))
	t.Logf("exposure %.1f; counted against the unit:\n%s", score, strings.Join(against, "\n"))
	if score > maxExposure {
		t.Errorf("got exposure %.1f, want at most %.1f: a setting was loosened", score, maxExposure)
	}
}

// TestUnitSecurityCatchesLoosening makes sure the check above can fail: the
// unit without its sandbox settings scores above maxExposure.
func TestUnitSecurityCatchesLoosening(t *testing.T) {
	analyze := systemdAnalyze(t)
	path := verifiable(t, "")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Everything from the privileges section on goes, [Install] stays.
	text := string(data)
	start, end := strings.Index(text, "# --- Privileges"), strings.Index(text, "[Install]")
	if start < 0 || end < start {
		t.Fatalf("unit has no privileges section before [Install]")
	}
	loose := filepath.Join(t.TempDir(), unitFile)
	if err := os.WriteFile(loose, []byte(text[:start]+text[end:]), 0o644); err != nil {
		t.Fatal(err)
	}
	if score, _ := exposure(t, analyze, loose); score <= maxExposure {
		t.Errorf("unit without its sandbox: got exposure %.1f, want above %.1f", score, maxExposure)
	}
}
