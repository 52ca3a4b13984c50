package host

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzCgroupFiles feeds arbitrary contents to the single-value cgroup and
// proc files (memory.usage_in_bytes, memory.current, pids.current, pid_max,
// threads-max through parseCount) and to the memory limit files (v1
// memory.limit_in_bytes, v2 memory.max).
func FuzzCgroupFiles(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		s := strings.TrimSpace(string(data))
		n, err := parseCount(fuzzFile, s)
		switch {
		case err != nil:
			checkNamesFile(t, err)
			if n != 0 {
				t.Fatalf("error %q with value %d", err, n)
			}
		case n < 0:
			t.Fatalf("count %d from %q: negative", n, s)
		default:
			if back, perr := strconv.ParseInt(s, 10, 64); perr != nil || back != n {
				t.Fatalf("count %d from %q, which reads as %d (%v)", n, s, back, perr)
			}
		}

		for _, v := range []cgroupVersion{cgroupV1, cgroupV2} {
			limit, ok, err := parseMemoryLimit(v, fuzzFile, data)
			switch {
			case err != nil:
				checkNamesFile(t, err)
				if ok || limit != 0 {
					t.Fatalf("v%d: error %q with limit %d, ok %t", v, err, limit, ok)
				}
			case ok:
				if limit <= 0 || limit > unlimitedAbove || limit != n {
					t.Fatalf("v%d: limit %d from %q: not the count %d in (0, 1<<62]", v, limit, s, n)
				}
			case limit != 0:
				t.Fatalf("v%d: no limit, yet %d", v, limit)
			case !(v == cgroupV2 && s == "max") && n <= unlimitedAbove:
				t.Fatalf("v%d: %q read as unlimited", v, s)
			}
		}
	})
}
