package testagent

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseExposition(t *testing.T) {
	text := `# HELP evictd_pass_duration_seconds Time of one pass.
# TYPE evictd_pass_duration_seconds histogram
evictd_pass_duration_seconds_bucket{le="0.1"} 1
evictd_pass_duration_seconds_sum 0.01
evictd_pass_duration_seconds_count 1
# TYPE evictd_build_info gauge
evictd_build_info{goversion="go1.26",version="v\"1\\2\n"} 1
evictd_evictions_owed 0
`
	got, err := ParseExposition(text)
	if err != nil {
		t.Fatal(err)
	}
	want := []Series{
		{"evictd_pass_duration_seconds", map[string]string{}},
		{"evictd_pass_duration_seconds", map[string]string{}},
		{"evictd_pass_duration_seconds", map[string]string{}},
		{"evictd_build_info", map[string]string{"goversion": "go1.26", "version": "v\"1\\2\n"}},
		{"evictd_evictions_owed", map[string]string{}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if _, err := ParseExposition(`evictd_x{a="unterminated} 1`); err == nil {
		t.Error("an unterminated label value: got nil, want an error")
	}
}

func TestMetricsDoc(t *testing.T) {
	path := filepath.Join(t.TempDir(), "METRICS.md")
	table := "| metric | labels | meaning |\n|---|---|---|\n" +
		"| `evictd_a_total`, `evictd_b_total` | signal, kind (hard, soft) | by kind |\n" +
		"| `evictd_c` | | one, for memory.pressure.* too, and `x|y` |\n" +
		"| `evictd_d` | source | wake-ups (memcg, fast-poll) |\n" +
		"| `evictd_signals` | signal (memory.available, nodefs.available) | readings |\n"
	if err := os.WriteFile(path, []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	doc, err := LoadMetricsDoc(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := doc.Families(), []string{"evictd_a_total", "evictd_b_total", "evictd_c", "evictd_d", "evictd_signals"}; !reflect.DeepEqual(got, want) {
		t.Errorf("families: got %v, want %v", got, want)
	}
	for _, tc := range []struct {
		name   string
		series Series
		want   string // "" when documented
	}{
		{"documented", Series{"evictd_a_total", map[string]string{"signal": "memory.available", "kind": "hard"}}, ""},
		{"a stall signal under memory.pressure.*", Series{"evictd_b_total", map[string]string{"signal": "memory.pressure.some.avg10", "kind": "soft"}}, ""},
		{"a value in the meaning", Series{"evictd_d", map[string]string{"source": "fast-poll"}}, ""},
		{"part of a value", Series{"evictd_d", map[string]string{"source": "fast"}}, `evictd_d: source="fast" served, and its row does not name the value`},
		{"a value not named", Series{"evictd_a_total", map[string]string{"kind": "medium"}}, `evictd_a_total: kind="medium" served, and its row does not name the value`},
		{"a signal the table does not name", Series{"evictd_a_total", map[string]string{"signal": "pid.available"}}, `evictd_a_total: signal="pid.available" served, and the table names no such signal`},
		{"a label not in the row", Series{"evictd_c", map[string]string{"signal": "memory.available"}}, "evictd_c: label signal served, and its row names the labels []"},
		{"a family not in the table", Series{"evictd_e", nil}, "evictd_e: served, and not in the table"},
		{"another program's family", Series{"go_goroutines", nil}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(doc.Undocumented([]Series{tc.series}), "; ")
			if tc.want == "" && got != "" || tc.want != "" && !strings.HasPrefix(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	served := []Series{{"evictd_a_total", nil}, {"evictd_c", nil}, {"evictd_d", nil}}
	got := doc.Unserved(served, map[string]string{"evictd_signals": "not here", "evictd_d": "stale", "evictd_z": "no row"})
	want := []string{
		"evictd_b_total: documented, and not served",
		"evictd_d: served, though explained as not (stale)",
		"evictd_z: explained, and not in the table",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("unserved: got %q, want %q", got, want)
	}
}
