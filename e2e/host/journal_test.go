package host

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/testing/testagent"
)

// TestAgentJSONLogsToTheJournal runs the agent standalone with
// --log-format=json and a temporary file as the stderr systemd would have
// connected to the journal (JOURNAL_STREAM names it) for a few passes and
// stops it: every line is the record's syslog priority and then one JSON
// object, with the priority its level's, and no object holds a key twice.
func TestAgentJSONLogsToTheJournal(t *testing.T) {
	stderr, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(stderr.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testagent.Binary(t), "--log-format=json", "--log-level=debug", "--housekeeping-interval=200ms",
		"--metrics-bind-address", testagent.FreeAddr(t), "--root-dir", t.TempDir(),
		"--container-runtime-endpoint=unix:///nonexistent/evictd-test.sock", "--runtime-request-timeout=200ms")
	cmd.Env = append(os.Environ(), fmt.Sprintf("JOURNAL_STREAM=%d:%d", st.Dev, st.Ino))
	cmd.Stdout, cmd.Stderr = io.Discard, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	read := func() []byte {
		b, err := os.ReadFile(stderr.Name())
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for deadline := time.Now().Add(20 * time.Second); bytes.Count(read(), []byte(`"msg":"decision"`)) < 3; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no three passes logged in time:\n%s", read())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("agent exit after SIGTERM: %v, want status 0", err)
	}

	priority := map[string]string{"ERROR": "<3>", "WARN": "<4>", "INFO": "<6>", "DEBUG": "<7>"}
	line := regexp.MustCompile(`^(<[0-7]>)(\{.*\})$`)
	lines := strings.Split(strings.TrimSuffix(string(read()), "\n"), "\n")
	for _, l := range lines {
		m := line.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("line is not a priority and a JSON object: %s", l)
			continue
		}
		var rec struct{ Level, Msg string }
		if err := json.Unmarshal([]byte(m[2]), &rec); err != nil {
			t.Errorf("line %s: %v", l, err)
			continue
		}
		if want := priority[rec.Level]; m[1] != want {
			t.Errorf("level %s: got priority %s, want %s: %s", rec.Level, m[1], want, l)
		}
		if dup, err := testagent.DuplicateKey([]byte(m[2])); dup != "" || err != nil {
			t.Errorf("key %q twice (%v): %s", dup, err, l)
		}
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, `"msg":"evictd stopped"`) {
		t.Errorf("last line %s, want evictd stopped", last)
	}
}
