package host

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/procfs"
)

// The benchmarks below read, on each iteration, what the loop reads on each
// pass and fast poll: the node's PSI file and its meminfo, copied from
// this machine's /proc. Each hand-written reader is measured beside
// prometheus/procfs's reader of the same file, which it is kept over.

// benchProc copies /proc's pressure/memory and meminfo into a directory
// laid out as a proc root, and returns it.
func benchProc(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "pressure"), 0o755); err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{filepath.Join("pressure", "memory"), "meminfo"} {
		data, err := os.ReadFile(filepath.Join("/proc", name))
		if err != nil {
			b.Skipf("this machine has no /proc/%s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

func BenchmarkReadPSI(b *testing.B) {
	file := filepath.Join(benchProc(b), "pressure", "memory")
	b.ReportAllocs()
	for b.Loop() {
		data, err := os.ReadFile(file)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := parsePSI(file, data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadPSIProcfs(b *testing.B) {
	fs, err := procfs.NewFS(benchProc(b))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fs.PSIStatsForResource("memory"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadMemTotal(b *testing.B) {
	file := filepath.Join(benchProc(b), "meminfo")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := readMemTotal(file); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadMemTotalProcfs(b *testing.B) {
	fs, err := procfs.NewFS(benchProc(b))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fs.Meminfo(); err != nil {
			b.Fatal(err)
		}
	}
}
