package host

import (
	"testing"

	"github.com/evictd/evictd/signals"
)

func pidObs(available, capacity int64) signals.Observation {
	return signals.Observation{Signal: signals.PIDAvailable, Available: available, Capacity: capacity, Time: now}
}

func TestPIDSource(t *testing.T) {
	const (
		pidMax     = "sys/kernel/pid_max"
		threadsMax = "sys/kernel/threads-max"
		loadavg    = "loadavg"
	)
	cases := []sourceCase{
		// min(pid_max 4194304, threads-max 126000) − 1234 tasks.
		{name: "threads-max is smaller", want: pidObs(126000-1234, 126000)},
		{name: "pid_max is smaller", proc: map[string]*string{pidMax: str("32768\n")}, want: pidObs(32768-1234, 32768)},
		{name: "loadavg from the issue", proc: map[string]*string{loadavg: str("0.00 0.01 0.05 1/234 5678\n")}, want: pidObs(126000-234, 126000)},

		{name: "missing pid_max", proc: map[string]*string{pidMax: nil}, wantErr: []string{"pid.available", "read ", "sys/kernel/pid_max"}, notExist: true},
		{name: "missing threads-max", proc: map[string]*string{threadsMax: nil}, wantErr: []string{"sys/kernel/threads-max"}, notExist: true},
		{name: "missing loadavg", proc: map[string]*string{loadavg: nil}, wantErr: []string{"proc/loadavg"}, notExist: true},
		{name: "negative pid_max", proc: map[string]*string{pidMax: str("-1\n")}, wantErr: []string{"sys/kernel/pid_max", `"-1" is negative`}},
		{name: "overflowing threads-max", proc: map[string]*string{threadsMax: str("99999999999999999999\n")},
			wantErr: []string{"sys/kernel/threads-max", "99999999999999999999", "out of range"}},
		{name: "zero capacity", proc: map[string]*string{threadsMax: str("0\n")}, wantErr: []string{"no capacity"}},
		{name: "loadavg without running/total", proc: map[string]*string{loadavg: str("0.52 0.58 0.59 1234 56789\n")},
			wantErr: []string{"proc/loadavg", `field 4 "1234"`}},
		{name: "loadavg truncated", proc: map[string]*string{loadavg: str("0.52 0.58 0.59 3/12")},
			wantErr: []string{"proc/loadavg", "5 fields"}},
		{name: "loadavg garbled total", proc: map[string]*string{loadavg: str("0.52 0.58 0.59 3/12x4 56789\n")},
			wantErr: []string{"proc/loadavg", `"12x4"`}},
		{name: "loadavg negative total", proc: map[string]*string{loadavg: str("0.52 0.58 0.59 3/-5 56789\n")},
			wantErr: []string{"proc/loadavg", `"-5" is negative`}},
	}
	for i := range cases {
		cases[i].cgroup, cases[i].driver = "cgroupv1", DriverCgroupfs
	}
	runSourceCases(t, cases, func(cfg Config) (signals.Source, error) { return NewPIDSource(cfg) })
}
