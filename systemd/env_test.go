package systemd

import (
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/evictd/evictd/internal/config"
	"github.com/evictd/evictd/thresholds"
)

const envFile = "evictd.env"

// envArgs reads EVICTD_ARGS from the environment file and splits it the way
// systemd splits an unbraced $EVICTD_ARGS in ExecStart: on whitespace.
//
// The value is read by sourcing the file in bash. For what the file may
// contain (checked first: double quotes, backslash-newline continuations,
// none of $ ` ' or other backslashes, no comment ending in a backslash)
// bash and systemd's EnvironmentFile parser give the same value.
func envArgs(t *testing.T) (args []string, comments string) {
	t.Helper()
	data, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatalf("read %s: %v", envFile, err)
	}
	var value []string
	var cs []string
	inValue := false
	for n, line := range strings.Split(string(data), "\n") {
		n++
		switch {
		case strings.HasPrefix(line, "#"):
			if inValue {
				t.Fatalf("%s:%d: comment inside EVICTD_ARGS", envFile, n)
			}
			if strings.HasSuffix(line, `\`) {
				t.Errorf("%s:%d: comment ends in a backslash; systemd would continue it onto the next line", envFile, n)
			}
			cs = append(cs, line)
		case strings.TrimSpace(line) == "":
			if inValue {
				t.Fatalf("%s:%d: blank line inside EVICTD_ARGS", envFile, n)
			}
		case strings.HasPrefix(line, `EVICTD_ARGS="`) || inValue:
			inValue = true
			body := strings.TrimSuffix(line, `\`)
			if strings.ContainsAny(strings.TrimPrefix(body, `EVICTD_ARGS="`), "$`'\\") {
				t.Errorf("%s:%d: %q holds a character bash and systemd read differently", envFile, n, line)
			}
			value = append(value, line)
			if !strings.HasSuffix(line, `\`) {
				inValue = false
			}
		default:
			t.Errorf("%s:%d: want comments and EVICTD_ARGS only, got %q", envFile, n, line)
		}
	}
	if len(value) == 0 {
		t.Fatalf("%s sets no EVICTD_ARGS", envFile)
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

// TestEnvFileParses runs EVICTD_ARGS through evictd's own flag set and
// configuration checks, so the shipped defaults start an agent.
func TestEnvFileParses(t *testing.T) {
	args, _ := envArgs(t)
	if len(args) < 5 {
		t.Fatalf("got %d arguments %q, want one per flag line", len(args), args)
	}
	fs, opts := config.NewFlagSet("evictd")
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %s flags %q: %v", envFile, args, err)
	}
	if rest := fs.Args(); len(rest) > 0 {
		t.Errorf("got stray arguments %q, want only flags", rest)
	}
	cfg, err := opts.Complete(fs)
	if err != nil {
		t.Fatalf("complete %s flags: %v", envFile, err)
	}
	if cfg == nil {
		t.Fatal("got a nil Config, want one")
	}
}

// TestEnvFileDefaults checks the values the file promises.
func TestEnvFileDefaults(t *testing.T) {
	args, _ := envArgs(t)
	flags := map[string]string{}
	for _, a := range args {
		name, value, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if _, dup := flags[name]; dup {
			t.Errorf("got --%s twice, want it once", name)
		}
		flags[name] = value
	}

	// --eviction-hard is the kubelet's Linux default, written out.
	got := map[string]string{}
	for _, pair := range strings.Split(flags["eviction-hard"], ",") {
		sig, q, ok := strings.Cut(pair, "<")
		if !ok {
			t.Fatalf("got eviction-hard entry %q, want signal<quantity", pair)
		}
		got[sig] = q
	}
	if want := thresholds.DefaultHard(); !maps.Equal(got, want) {
		t.Errorf("got --eviction-hard %v, want the kubelet defaults %v", got, want)
	}
	if got, want := flags["metrics-bind-address"], "127.0.0.1:9847"; got != want {
		t.Errorf("got --metrics-bind-address=%s, want %s (loopback)", got, want)
	}
	if _, ok := flags["kubeconfig"]; !ok {
		t.Error("got no --kubeconfig, want evictd's own credentials named")
	}
	// The package does not write the kubeconfig: until the operator has,
	// the agent starts standalone instead of restarting in a loop.
	if v, ok := flags["kubeconfig-optional"]; !ok || v != "" {
		t.Errorf("got --kubeconfig-optional %q (set %v), want it set, bare", v, ok)
	}
	if _, ok := flags["dry-run"]; ok {
		t.Error("got --dry-run in the defaults, want it documented but off")
	}
}

// TestEnvFileExplainsEveryFlag checks that each flag set is explained in
// the comments, and each flag the comments mention exists.
func TestEnvFileExplainsEveryFlag(t *testing.T) {
	args, comments := envArgs(t)
	fs, _ := config.NewFlagSet("evictd")
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#\s+--([a-z0-9-]+)`).FindAllStringSubmatch(comments, -1) {
		documented[m[1]] = true
	}
	// Several flags can share a comment line ("--eviction-soft=… --eviction-soft-grace-period=…").
	for _, m := range regexp.MustCompile(`\s--([a-z0-9-]+)=`).FindAllStringSubmatch(comments, -1) {
		documented[m[1]] = true
	}
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !documented[name] {
			t.Errorf("got --%s in EVICTD_ARGS without a comment explaining it", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(documented)) {
		if fs.Lookup(name) == nil {
			t.Errorf("comments explain --%s, which evictd does not have", name)
		}
	}
}
