package notify

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// FuzzMemcgFiles feeds arbitrary contents to the parsers of the files the
// memcg notifier reads when it sets its level and wakes: memory.stat,
// memory.usage_in_bytes (or memory.current) and memory.events. Whatever the
// bytes, they return an error naming the file, or non-negative figures
// written in the file as returned; and a memory.events that parses has not
// changed from itself.
func FuzzMemcgFiles(f *testing.F) {
	const file = "/fuzz/kubepods/memory.stat"
	f.Fuzz(func(t *testing.T, data []byte) {
		namesFile := func(err error) {
			t.Helper()
			if !strings.Contains(err.Error(), file) {
				t.Fatalf("error %q does not name the file %s", err, file)
			}
		}

		vals, err := statValues(file, data, "total_inactive_file", "inactive_file")
		if err != nil {
			namesFile(err)
		} else {
			for i, k := range []string{"total_inactive_file", "inactive_file"} {
				if vals[i] < 0 {
					t.Fatalf("%s = %d, negative", k, vals[i])
				}
				found := false
				for line := range bytes.Lines(data) {
					key, v, ok := strings.Cut(strings.TrimSpace(string(line)), " ")
					if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); ok && key == k && err == nil && n == vals[i] {
						found = true
					}
				}
				if !found {
					t.Fatalf("%s = %d, which no line of the file says", k, vals[i])
				}
			}
		}

		n, err := singleValue(file, data)
		switch {
		case err != nil:
			namesFile(err)
		case n < 0:
			t.Fatalf("usage %d, negative", n)
		default:
			if back, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64); err != nil || back != n {
				t.Fatalf("usage %d from %q", n, data)
			}
		}

		if _, err := parseEvents(file, data); err != nil {
			namesFile(err)
		} else if eventsChanged(file, data, bytes.Clone(data)) {
			t.Fatalf("memory.events %q changed from itself", data)
		}
	})
}
