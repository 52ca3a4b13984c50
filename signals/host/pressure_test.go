package host

import (
	"reflect"
	"strings"
	"testing"

	"github.com/evictd/evictd/signals"
)

func TestParsePSI(t *testing.T) {
	const good = "some avg10=12.50 avg60=4.02 avg300=0.90 total=123456789\nfull avg10=8.25 avg60=2.00 avg300=0.31 total=98765432\n"
	tests := []struct {
		name    string
		in      string
		want    map[signals.Signal]int64
		wantErr string
	}{
		{name: "kernel format", in: good, want: map[signals.Signal]int64{
			signals.MemoryPressureSomeAvg10: 1250, signals.MemoryPressureSomeAvg60: 402, signals.MemoryPressureSomeAvg300: 90,
			signals.MemoryPressureFullAvg10: 825, signals.MemoryPressureFullAvg60: 200, signals.MemoryPressureFullAvg300: 31,
		}},
		{name: "idle", in: "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", want: map[signals.Signal]int64{
			signals.MemoryPressureSomeAvg10: 0, signals.MemoryPressureSomeAvg60: 0, signals.MemoryPressureSomeAvg300: 0,
			signals.MemoryPressureFullAvg10: 0, signals.MemoryPressureFullAvg60: 0, signals.MemoryPressureFullAvg300: 0,
		}},
		{name: "full stall, one decimal, no decimals, extra key, no newline",
			in: "full avg10=100.00 avg60=99.5 avg300=7 total=1 future=3\nsome avg10=100 avg60=0.1 avg300=0.01 total=2", want: map[signals.Signal]int64{
				signals.MemoryPressureSomeAvg10: 10000, signals.MemoryPressureSomeAvg60: 10, signals.MemoryPressureSomeAvg300: 1,
				signals.MemoryPressureFullAvg10: 10000, signals.MemoryPressureFullAvg60: 9950, signals.MemoryPressureFullAvg300: 700,
			}},
		{name: "empty", in: "", wantErr: "no some line"},
		{name: "truncated after some", in: "some avg10=1.00 avg60=1.00 avg300=1.00 total=5\n", wantErr: "no full line"},
		{name: "truncated mid line", in: "some avg10=1.00 avg60=1.00 avg300=1.00 total=5\nfull avg10=1.0", wantErr: "full line has no avg60"},
		{name: "truncated value", in: strings.Replace(good, "avg300=0.31", "avg300=0.", 1), wantErr: `full avg300="0.": not a decimal percentage`},
		{name: "NaN", in: strings.Replace(good, "avg10=12.50", "avg10=NaN", 1), wantErr: `some avg10="NaN": not a decimal percentage`},
		{name: "Inf", in: strings.Replace(good, "avg10=12.50", "avg10=+Inf", 1), wantErr: `some avg10="+Inf": not a decimal percentage`},
		{name: "negative", in: strings.Replace(good, "avg60=2.00", "avg60=-2.00", 1), wantErr: `full avg60="-2.00": not a decimal percentage`},
		{name: "exponent", in: strings.Replace(good, "avg60=2.00", "avg60=2e1", 1), wantErr: `full avg60="2e1": not a decimal percentage`},
		{name: "above 100", in: strings.Replace(good, "avg10=8.25", "avg10=100.01", 1), wantErr: `full avg10="100.01": above 100%`},
		{name: "far above 100", in: strings.Replace(good, "avg10=8.25", "avg10=99999999999999999999", 1), wantErr: `above 100%`},
		{name: "three decimals", in: strings.Replace(good, "avg10=8.25", "avg10=8.255", 1), wantErr: "more than two decimals"},
		{name: "empty value", in: strings.Replace(good, "avg10=8.25", "avg10=", 1), wantErr: `full avg10="": not a decimal percentage`},
		{name: "not key=value", in: strings.Replace(good, "avg10=8.25", "avg10:8.25", 1), wantErr: `"avg10:8.25" is not key=value`},
		{name: "duplicate key", in: strings.Replace(good, "total=98765432", "avg10=1.00 total=1", 1), wantErr: "avg10 given twice"},
		{name: "duplicate line", in: good + "some avg10=1.00 avg60=1.00 avg300=1.00 total=5\n", wantErr: "line 3: a second some line"},
		{name: "unknown line", in: good + "partial avg10=1.00\n", wantErr: `line 3 "partial avg10=1.00" does not start with some or full`},
		{name: "negative total", in: strings.Replace(good, "total=98765432", "total=-1", 1), wantErr: `value "-1" is negative (full total)`},
		{name: "garbled total", in: strings.Replace(good, "total=98765432", "total=lots", 1), wantErr: "(full total)"},
		{name: "no total", in: strings.Replace(good, " total=98765432", "", 1), wantErr: "full line has no total"},
		{name: "binary garbage", in: "\x00\x01\x02", wantErr: "does not start with some or full"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parsePSI("/proc/pressure/memory", []byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "/proc/pressure/memory") {
					t.Fatalf("got %v, %v; want an error naming the file and holding %q", got, err, tc.wantErr)
				}
				if got != nil {
					t.Errorf("got values %v with the error, want none", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
