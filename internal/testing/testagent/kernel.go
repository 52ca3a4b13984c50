package testagent

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// ReadInt reads a file of the kernel's that holds one number (a cgroup's
// memory.current, /proc/sys/kernel/pid_max), to compare with what the
// agent reports.
func ReadInt(t testing.TB, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}
