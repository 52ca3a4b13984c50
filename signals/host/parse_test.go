package host

import (
	"strings"
	"testing"
)

// TestParseKeyed covers memory.stat contents that no fixture tree holds:
// each bad one is an error naming the file and the line or value at fault.
func TestParseKeyed(t *testing.T) {
	const file = "/sys/fs/cgroup/memory/memory.stat"
	tests := []struct {
		name    string
		in      string
		want    int64
		wantErr []string
	}{
		{name: "kernel format", in: "cache 1\ntotal_inactive_file 4096\n", want: 4096},
		{name: "no trailing newline", in: "total_inactive_file 4096", want: 4096},
		{name: "CRLF line ends", in: "cache 1\r\ntotal_inactive_file 4096\r\n", want: 4096},
		{name: "key given twice", in: "total_inactive_file 1\ntotal_inactive_file 2\n",
			wantErr: []string{file, "line 2: key total_inactive_file given twice"}},
		{name: "another key given twice", in: "cache 1\ncache 2\ntotal_inactive_file 4096\n",
			wantErr: []string{file, "line 2: key cache given twice"}},
		{name: "NaN", in: "total_inactive_file NaN\n", wantErr: []string{file, `"NaN"`, "line 1, key total_inactive_file"}},
		{name: "Inf", in: "total_inactive_file +Inf\n", wantErr: []string{file, `"+Inf"`}},
		{name: "max", in: "total_inactive_file max\n", wantErr: []string{file, `"max"`}},
		{name: "fraction", in: "total_inactive_file 1.5\n", wantErr: []string{file, `"1.5"`}},
		{name: "exponent", in: "total_inactive_file 1e9\n", wantErr: []string{file, `"1e9"`}},
		{name: "above int64", in: "total_inactive_file 9223372036854775808\n", wantErr: []string{file, "9223372036854775808", "out of range"}},
		{name: "negative", in: "total_inactive_file -1\n", wantErr: []string{file, `"-1" is negative`}},
		{name: "non-UTF-8 value", in: "total_inactive_file \xff\xfe\n", wantErr: []string{file, `"\xff\xfe"`}},
		{name: "NUL in value", in: "total_inactive_file 1\x00\n", wantErr: []string{file, `"1\x00"`}},
		{name: "three fields", in: "total_inactive_file 1 2\n", wantErr: []string{file, `line 1 "total_inactive_file 1 2" is not "key value"`}},
		{name: "key alone (truncated)", in: "cache 1\ntotal_inactive_file", wantErr: []string{file, `line 2 "total_inactive_file" is not "key value"`}},
		{name: "line too long", in: "cache " + strings.Repeat("1", 70000) + "\n", wantErr: []string{file, "token too long"}},
		{name: "empty", in: "", wantErr: []string{file, "no total_inactive_file line"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseKeyed(file, []byte(tt.in), "total_inactive_file")
			if tt.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				if got["total_inactive_file"] != tt.want {
					t.Fatalf("got %d, want %d", got["total_inactive_file"], tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("got %v, want an error", got)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}
