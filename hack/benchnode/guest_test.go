package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestGuestArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{
			args: []string{"--guest", "--rates", "200,800", "--reps", "2"},
			want: []string{"--pods-mib=1024", "--rates", "200,800", "--reps", "2", "--in-guest=/run/vm", "--native-touch=80ms", "--out=/run/vm/bench-node.out"},
		},
		{
			// The caller's kubepods limit wins: the last flag given counts.
			args: []string{"-guest=true", "--pods-mib=1500", "--out=x.out"},
			want: []string{"--pods-mib=1024", "--pods-mib=1500", "--out=x.out", "--in-guest=/run/vm", "--native-touch=80ms", "--out=/run/vm/bench-node.out"},
		},
	} {
		if got := guestArgs(tc.args, 80*time.Millisecond); !slices.Equal(got, tc.want) {
			t.Errorf("guestArgs(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

func TestGuestArgsParse(t *testing.T) {
	// What the guest is given parses, with the scale's input and the
	// output in the shared directory.
	cfg, err := parseFlags(guestArgs([]string{"--guest", "--sides", "kubelet,evictd", "--threshold-mib", "200,500,1000"}, 80*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.guest || cfg.inGuest != "/run/vm" || cfg.nativeTouch != 80*time.Millisecond || cfg.out != "/run/vm/bench-node.out" || cfg.podsMiB != 1024 {
		t.Errorf("parsed %+v", cfg)
	}
}

func TestScaled(t *testing.T) {
	for _, tc := range []struct {
		scale float64
		v     int
		want  int
	}{
		{0, 500, 500}, // natively: not set
		{1, 500, 500},
		{12.5, 500, 40},
		{12.5, 1600, 128},
		{12.5, 5, 1}, // never 0 MiB
	} {
		if got := (config{scale: tc.scale}).scaled(tc.v); got != tc.want {
			t.Errorf("scale %v: scaled(%d) = %d, want %d", tc.scale, tc.v, got, tc.want)
		}
	}
}

func TestGuestFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--guest", "--in-guest=/run/vm", "--native-touch=1s"}, "give only --guest"},
		{[]string{"--in-guest=/run/vm"}, "--in-guest needs --native-touch"},
		{[]string{"--guest", "--scenario", "local-storage"}, "only the memory scenario"},
		{[]string{"--threshold-mib", "1900"}, "must stay below --pods-mib"},
		{[]string{"--hog-cpu", "fast"}, `--hog-cpu: "fast" is not a positive CPU quantity`},
		{[]string{"--hog-cpu", "-1"}, `--hog-cpu: "-1" is not`},
	} {
		_, err := parseFlags(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseFlags(%q) = %v, want an error with %q", tc.args, err, tc.want)
		}
	}
	if cfg, err := parseFlags([]string{"--hog-cpu", "500m"}); err != nil || cfg.hogCPU != "500m" {
		t.Errorf("--hog-cpu 500m: %+v, %v", cfg.hogCPU, err)
	}
	// In the guest the headroom is checked scaled: 1000 + 300 MiB over
	// s = 12.5 fits 1024.
	cfg := config{thresholdsMiB: []int{1000}, baseBelow: 300, podsMiB: 1024, scale: 12.5}
	if err := cfg.checkHeadroom(); err != nil {
		t.Errorf("scaled headroom refused: %v", err)
	}
	cfg.scale = 1
	if err := cfg.checkHeadroom(); err == nil {
		t.Error("1000 + 300 MiB below a kubepods limit of 1024 MiB accepted")
	}
}
