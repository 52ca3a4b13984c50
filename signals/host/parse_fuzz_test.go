package host

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// The fuzz targets below feed arbitrary file contents to the strict readers
// of parse.go. Whatever the bytes, a reader returns either an error that
// names the file, or figures that are non-negative and written in the file
// as they are returned: never a panic, never a made-up zero.

// fuzzFile is the file name the targets pass, so that errors can be checked
// for it.
const fuzzFile = "/fuzz/cgroup/memory.stat"

// checkNamesFile fails t unless err names fuzzFile.
func checkNamesFile(t *testing.T, err error) {
	t.Helper()
	if !strings.Contains(err.Error(), fuzzFile) {
		t.Fatalf("error %q does not name the file %s", err, fuzzFile)
	}
}

// lineValue returns the integer written after key on a "key value" line of
// b, the way the kernel writes it; ok is false when there is no such line.
func lineValue(b []byte, key string) (v int64, ok bool) {
	for line := range bytes.Lines(b) {
		f := strings.Fields(string(line))
		if len(f) == 2 && f[0] == key {
			n, err := strconv.ParseInt(f[1], 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

func FuzzMemoryStat(f *testing.F) {
	// Seeds: testdata/fuzz/FuzzMemoryStat (this machine's memory.stat,
	// cgroup v2 files, truncated and garbled ones).
	f.Fuzz(func(t *testing.T, data []byte) {
		// The keys of a v1 cgroup, then of the v2 root cgroup.
		for _, want := range [][]string{{"total_inactive_file"}, {"anon", "file", "inactive_file"}} {
			got, err := parseKeyed(fuzzFile, data, want...)
			if err != nil {
				checkNamesFile(t, err)
				if got != nil {
					t.Fatalf("error %q with values %v", err, got)
				}
				continue
			}
			if len(got) != len(want) {
				t.Fatalf("want keys %q, got %v", want, got)
			}
			for _, k := range want {
				v := got[k]
				if v < 0 {
					t.Fatalf("%s = %d, negative", k, v)
				}
				if w, ok := lineValue(data, k); !ok || w != v {
					t.Fatalf("%s = %d, but the file has %d (line found: %t)", k, v, w, ok)
				}
			}
		}
	})
}

func FuzzMeminfo(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := parseMemTotal(fuzzFile, data)
		if err != nil {
			checkNamesFile(t, err)
			if got != 0 {
				t.Fatalf("error %q with MemTotal %d", err, got)
			}
			return
		}
		if got <= 0 || got%1024 != 0 {
			t.Fatalf("MemTotal %d bytes: not a positive number of kB", got)
		}
		var kb int64 = -1
		for line := range bytes.Lines(data) {
			if f := strings.Fields(string(line)); len(f) == 3 && f[0] == "MemTotal:" && f[2] == "kB" {
				kb, _ = strconv.ParseInt(f[1], 10, 64)
				break
			}
		}
		if kb*1024 != got {
			t.Fatalf("MemTotal %d bytes, but the file says %d kB", got, kb)
		}
	})
}

func FuzzHugetlb(f *testing.F) {
	// Seeds: testdata/fuzz/FuzzHugetlb (this machine's meminfo, meminfo
	// with hugepages of two sizes, without hugetlb, garbled Hugetlb lines).
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := parseHugetlb(fuzzFile, data)
		if err != nil {
			checkNamesFile(t, err)
			if got != 0 {
				t.Fatalf("error %q with %d bytes of hugepages", err, got)
			}
			return
		}
		if got < 0 || got%1024 != 0 {
			t.Fatalf("%d bytes of hugepages: not a non-negative number of kB", got)
		}
		// The first Hugetlb line says it; with none, neither may
		// HugePages_Total be there, and there are none.
		var kb int64
		seen, total := false, false
		for line := range bytes.Lines(data) {
			f := strings.Fields(string(line))
			if len(f) > 0 && f[0] == "HugePages_Total:" {
				total = true
			}
			if len(f) == 3 && f[0] == "Hugetlb:" && f[2] == "kB" && !seen {
				kb, _ = strconv.ParseInt(f[1], 10, 64)
				seen = true
			}
		}
		if !seen && (total || got != 0) {
			t.Fatalf("%d bytes with no Hugetlb line (HugePages_Total there: %v)", got, total)
		}
		if kb*1024 != got {
			t.Fatalf("%d bytes of hugepages, but the file says %d kB", got, kb)
		}
	})
}

func FuzzLoadavg(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := parseTotalTasks(fuzzFile, data)
		if err != nil {
			checkNamesFile(t, err)
			if got != 0 {
				t.Fatalf("error %q with %d tasks", err, got)
			}
			return
		}
		if got < 0 {
			t.Fatalf("%d tasks, negative", got)
		}
		_, total, _ := strings.Cut(strings.Fields(string(data))[3], "/")
		if n, err := strconv.ParseInt(total, 10, 64); err != nil || n != got {
			t.Fatalf("%d tasks, but the file says %q", got, total)
		}
	})
}
