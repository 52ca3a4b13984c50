package wakeup

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzMemoryEvents feeds arbitrary contents to the reading of memory.events,
// the one file notify parses itself (memory.stat and the usage files are
// read by signals/host, whose FuzzMemoryStat and FuzzCgroupFiles cover them).
// Whatever the bytes, parseEvents returns an error naming the file or
// counters written in the file; a file that does not parse counts as
// changed, so a pass looks; one that parses has not changed from itself, and
// has changed once any one of its counters moves.
func FuzzMemoryEvents(f *testing.F) {
	const file = "/fuzz/kubepods/memory.events"
	f.Fuzz(func(t *testing.T, data []byte) {
		counters, err := parseEvents(file, data)
		if err != nil {
			if !strings.Contains(err.Error(), file) {
				t.Fatalf("error %q does not name the file %s", err, file)
			}
			if !eventsChanged(file, data, bytes.Clone(data)) {
				t.Fatalf("memory.events %q does not parse, yet counts as unchanged", data)
			}
			return
		}
		for k, v := range counters {
			if !hasLine(data, k, v) {
				t.Fatalf("%s = %d, which no line of the file says", k, v)
			}
		}
		if eventsChanged(file, data, bytes.Clone(data)) {
			t.Fatalf("memory.events %q changed from itself", data)
		}
		// The same counters written afresh, one of them moved.
		keys := slices.Sorted(maps.Keys(counters))
		for i, moved := range keys {
			var b bytes.Buffer
			for j, k := range keys {
				v := counters[k]
				if j == i {
					v ^= 1
				}
				fmt.Fprintf(&b, "%s %d\n", k, v)
			}
			if !eventsChanged(file, data, b.Bytes()) {
				t.Fatalf("counter %s moved in %q, yet memory.events %q counts as unchanged", moved, b.Bytes(), data)
			}
		}
	})
}

// hasLine reports whether some line of data says key has value v, as
// parseEvents reads a line.
func hasLine(data []byte, key string, v int64) bool {
	for line := range bytes.Lines(data) {
		k, val, ok := strings.Cut(strings.TrimSpace(string(line)), " ")
		if n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64); ok && k == key && err == nil && n == v {
			return true
		}
	}
	return false
}
