package host

import (
	"strings"
	"testing"
)

// TestParseMemoryLimit covers the memory limit files' contents: a limit, no
// limit ("max" on v2, anything above 1<<62), or an error naming the file and
// the value.
func TestParseMemoryLimit(t *testing.T) {
	const file = "/sys/fs/cgroup/kubepods/memory.max"
	tests := []struct {
		name    string
		v       cgroupVersion
		in      string
		want    int64
		ok      bool
		wantErr string
	}{
		{name: "v1 limit", v: cgroupV1, in: "1073741824\n", want: 1073741824, ok: true},
		{name: "v1 unlimited", v: cgroupV1, in: "9223372036854771712\n"},
		{name: "v2 max", v: cgroupV2, in: "max\n"},
		{name: "v2 max without newline", v: cgroupV2, in: "max"},
		{name: "v1 max is not a v1 value", v: cgroupV1, in: "max\n", wantErr: `"max"`},
		{name: "v2 MAX", v: cgroupV2, in: "MAX\n", wantErr: `"MAX"`},
		{name: "zero", v: cgroupV2, in: "0\n", wantErr: "memory limit is 0"},
		{name: "negative", v: cgroupV1, in: "-1\n", wantErr: `"-1" is negative`},
		{name: "above int64", v: cgroupV1, in: "18446744073709551615\n", wantErr: "18446744073709551615"},
		{name: "empty (truncated)", v: cgroupV2, in: "", wantErr: "empty value"},
		{name: "garbled", v: cgroupV2, in: "12G\n", wantErr: `"12G"`},
		{name: "NaN", v: cgroupV2, in: "NaN\n", wantErr: `"NaN"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := parseMemoryLimit(tt.v, file, []byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), file) {
					t.Fatalf("got %d, %t, error %v; want an error naming %s and containing %q", got, ok, err, file, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want || ok != tt.ok {
				t.Fatalf("got %d, %t, %v; want %d, %t", got, ok, err, tt.want, tt.ok)
			}
		})
	}
}
