package thresholds

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/evictd/evictd/signals"
)

// describe lists Describe() of each threshold, for comparing whole results.
func describe(ths []Threshold) []string {
	out := make([]string, len(ths))
	for i, t := range ths {
		out[i] = t.Describe()
	}
	return out
}

func TestParseAccepted(t *testing.T) {
	tests := []struct {
		name string
		s    Settings
		want []string
	}{{
		name: "nil hard map gives the Linux defaults",
		s:    Settings{},
		want: []string{
			"memory.available<100Mi hard (default)",
			"nodefs.available<10% hard (default)",
			"nodefs.inodesFree<5% hard (default)",
			"imagefs.available<15% hard (default)",
			"imagefs.inodesFree<5% hard (default)",
		},
	}, {
		name: "quantities in every notation",
		s: Settings{Hard: map[string]string{
			"memory.available":  "1.5Gi",
			"nodefs.available":  "500M",
			"nodefs.inodesFree": "1e6",
			"pid.available":     "0.5",
			"imagefs.available": "+2Gi",
		}},
		want: []string{
			"memory.available<1536Mi hard (--eviction-hard)",
			"nodefs.available<500M hard (--eviction-hard)",
			"nodefs.inodesFree<1e6 hard (--eviction-hard)",
			"imagefs.available<+2Gi hard (--eviction-hard)",
			"pid.available<500m hard (--eviction-hard)",
		},
	}, {
		name: "percentages; every trailing % is dropped as in the kubelet",
		s: Settings{Hard: map[string]string{
			"nodefs.available":   "7.5%",
			"nodefs.inodesFree":  "0.001%",
			"imagefs.available":  "15%",
			"imagefs.inodesFree": "5%%",
			"pid.available":      "99.9%",
		}},
		want: []string{
			"nodefs.available<7.5% hard (--eviction-hard)",
			"nodefs.inodesFree<0.001% hard (--eviction-hard)",
			"imagefs.available<15% hard (--eviction-hard)",
			"imagefs.inodesFree<5% hard (--eviction-hard)",
			"pid.available<99.9% hard (--eviction-hard)",
		},
	}, {
		name: "0% and 100% are ignored, other spellings of 0 and 100 are not",
		s: Settings{Hard: map[string]string{
			"memory.available":   "0%",
			"nodefs.available":   "100%",
			"nodefs.inodesFree":  "-0%",
			"imagefs.available":  "100.0%",
			"imagefs.inodesFree": "0.0%",
		}},
		want: []string{
			"nodefs.inodesFree<-0% hard (--eviction-hard)",
			"imagefs.available<100.0% hard (--eviction-hard)",
			"imagefs.inodesFree<0.0% hard (--eviction-hard)",
		},
	}, {
		name: "soft thresholds take their grace period; hard before soft",
		s: Settings{
			Hard:            map[string]string{"memory.available": "100Mi"},
			Soft:            map[string]string{"memory.available": "1Gi", "nodefs.available": "15%"},
			SoftGracePeriod: map[string]string{"memory.available": "1m30s", "nodefs.available": "2h"},
		},
		want: []string{
			"memory.available<100Mi hard (--eviction-hard)",
			"memory.available<1Gi soft grace=1m30s (--eviction-soft)",
			"nodefs.available<15% soft grace=2h0m0s (--eviction-soft)",
		},
	}, {
		name: "a soft threshold with a 0s grace period is accepted",
		s: Settings{
			Hard:            map[string]string{},
			Soft:            map[string]string{"nodefs.available": "1Gi"},
			SoftGracePeriod: map[string]string{"nodefs.available": "0s"},
		},
		want: []string{"nodefs.available<1Gi soft grace=0s (treated as hard) (--eviction-soft)"},
	}, {
		name: "minimum reclaim goes to every threshold of its signal",
		s: Settings{
			Hard:            map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "pid.available": "1k"},
			Soft:            map[string]string{"memory.available": "1Gi"},
			SoftGracePeriod: map[string]string{"memory.available": "1m"},
			MinimumReclaim:  map[string]string{"memory.available": "0", "nodefs.available": "100%", "pid.available": "150%"},
		},
		want: []string{
			"memory.available<100Mi hard minReclaim=0 (--eviction-hard)",
			"memory.available<1Gi soft grace=1m0s minReclaim=0 (--eviction-soft)",
			"nodefs.available<10% hard minReclaim=100% (--eviction-hard)",
			"pid.available<1k hard minReclaim=150% (--eviction-hard)",
		},
	}, {
		name: "source names come from the settings",
		s: Settings{
			Hard: map[string]string{"memory.available": "1Gi"}, HardSource: "config evictionHard",
			Soft: map[string]string{"memory.available": "2Gi"}, SoftSource: "config evictionSoft",
			SoftGracePeriod: map[string]string{"memory.available": "1m"},
			MinimumReclaim:  map[string]string{"memory.available": "5%"},
		},
		want: []string{
			"memory.available<1Gi hard minReclaim=5% (config evictionHard)",
			"memory.available<2Gi soft grace=1m0s minReclaim=5% (config evictionSoft)",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(tt.s)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := describe(p.Thresholds); !slices.Equal(got, tt.want) {
				t.Errorf("got\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(tt.want, "\n\t"))
			}
		})
	}
}

func TestParseValues(t *testing.T) {
	// The values behind the text, where formatting could hide a difference.
	p, err := Parse(Settings{
		Hard:           map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "-0%"},
		MinimumReclaim: map[string]string{"memory.available": "50Mi"},
	})
	if err != nil {
		t.Fatal(err)
	}
	mem, nodefs, inodes := p.Thresholds[0], p.Thresholds[1], p.Thresholds[2]
	if got, want := Quantity(mem.Value, 0), int64(100<<20); got != want {
		t.Errorf("memory.available: got %d, want %d", got, want)
	}
	if mem.Soft || mem.GracePeriod != 0 || !mem.Hard() {
		t.Errorf("memory.available: got soft=%v grace=%v, want a hard threshold", mem.Soft, mem.GracePeriod)
	}
	if mem.MinReclaim == nil || Quantity(*mem.MinReclaim, 0) != 50<<20 {
		t.Errorf("memory.available minimum reclaim: got %v, want 50Mi", mem.MinReclaim)
	}
	if nodefs.Value.Quantity != nil || nodefs.Value.Percentage != float32(10)/100 {
		t.Errorf("nodefs.available: got %+v, want percentage 0.1", nodefs.Value)
	}
	if inodes.Value.Percentage != 0 {
		t.Errorf("nodefs.inodesFree<-0%%: got %v, want a zero percentage", inodes.Value.Percentage)
	}
}

func TestParseErrors(t *testing.T) {
	hard := func(sig, val string) Settings { return Settings{Hard: map[string]string{sig: val}} }
	reclaim := func(sig, val string) Settings {
		return Settings{Hard: map[string]string{}, MinimumReclaim: map[string]string{sig: val}}
	}
	grace := func(val string) Settings {
		return Settings{
			Hard:            map[string]string{},
			Soft:            map[string]string{"memory.available": "1Gi"},
			SoftGracePeriod: map[string]string{"memory.available": val},
		}
	}
	enforce := func(vals ...string) Settings { return Settings{EnforceNodeAllocatable: vals} }
	quantityFormat := resource.ErrFormatWrong.Error()

	tests := []struct {
		name string
		s    Settings
		want string
		is   error // optional: errors.Is(err, is) must hold
	}{
		{"unknown hard signal", hard("memory.free", "1Gi"), "--eviction-hard: unsupported eviction signal memory.free", nil},
		{"empty signal", hard("", "1Gi"), "--eviction-hard: unsupported eviction signal ", nil},
		{"unknown soft signal", Settings{Soft: map[string]string{"cpu": "1"}}, "--eviction-soft: unsupported eviction signal cpu", nil},
		{"unknown grace signal", Settings{SoftGracePeriod: map[string]string{"disk": "1m"}}, "--eviction-soft-grace-period: unsupported eviction signal disk", nil},
		{"unknown reclaim signal", Settings{MinimumReclaim: map[string]string{"inodes": "1"}}, "--eviction-minimum-reclaim: unsupported eviction signal inodes", nil},
		{"negative percentage", hard("nodefs.available", "-5%"), "--eviction-hard: eviction percentage threshold nodefs.available must be >= 0%: -5%", nil},
		{"negative infinite percentage", hard("nodefs.available", "-Inf%"), "--eviction-hard: eviction percentage threshold nodefs.available must be >= 0%: -Inf%", nil},
		{"NaN percentage", hard("nodefs.available", "NaN%"), "--eviction-hard: eviction percentage threshold nodefs.available must be >= 0%: NaN%", nil},
		{"percentage over 100", hard("nodefs.available", "100.5%"), "--eviction-hard: eviction percentage threshold nodefs.available must be <= 100%: 100.5%", nil},
		{"infinite percentage", hard("nodefs.available", "Inf%"), "--eviction-hard: eviction percentage threshold nodefs.available must be <= 100%: Inf%", nil},
		{"percentage out of float range", hard("nodefs.available", "1e400%"), `--eviction-hard: strconv.ParseFloat: parsing "1e400": value out of range`, strconv.ErrRange},
		{"percentage with spaces", hard("nodefs.available", "  5%"), `--eviction-hard: strconv.ParseFloat: parsing "  5": invalid syntax`, strconv.ErrSyntax},
		{"percent sign alone", hard("nodefs.available", "%"), `--eviction-hard: strconv.ParseFloat: parsing "": invalid syntax`, strconv.ErrSyntax},
		{"empty quantity", hard("memory.available", ""), "--eviction-hard: memory.available<: " + quantityFormat, resource.ErrFormatWrong},
		{"quantity with spaces", hard("memory.available", " 1Gi"), "--eviction-hard: memory.available< 1Gi: " + quantityFormat, resource.ErrFormatWrong},
		{"percent sign not last", hard("memory.available", "5% "), "--eviction-hard: memory.available<5% : " + quantityFormat, resource.ErrFormatWrong},
		{"bad quantity suffix", hard("memory.available", "1iK"), "--eviction-hard: memory.available<1iK: " + resource.ErrSuffix.Error(), resource.ErrSuffix},
		// Found by FuzzParse: ParseQuantity caps these at the largest
		// int64 and String prints the first as "100".
		{"threshold above int64", hard("memory.available", "100000000000000000000000"),
			"--eviction-hard: eviction threshold memory.available must be less than 9223372036854775807: 100000000000000000000000", nil},
		{"threshold in Ei above int64", hard("memory.available", "1000000000000001008Ei"),
			"--eviction-hard: eviction threshold memory.available must be less than 9223372036854775807: 1000000000000001008Ei", nil},
		{"threshold at the largest int64", hard("nodefs.inodesFree", "9223372036854775807"),
			"--eviction-hard: eviction threshold nodefs.inodesFree must be less than 9223372036854775807: 9223372036854775807", nil},
		{"reclaim above int64", reclaim("memory.available", "100000000000000000000000"),
			"--eviction-minimum-reclaim: eviction minimum reclaim memory.available must be less than 9223372036854775807: 100000000000000000000000", nil},
		// Found by FuzzParse (a worker hung): resource.ParseQuantity
		// expands the exponent in full.
		{"exponent that never finishes parsing", hard("memory.available", "1e2147483647"),
			`--eviction-hard: memory.available<1e2147483647: exponent out of range (at most ±999)`, nil},
		{"negative exponent that takes seconds", hard("memory.available", "1e-1000000"),
			`--eviction-hard: memory.available<1e-1000000: exponent out of range (at most ±999)`, nil},
		{"exponent in a minimum reclaim", reclaim("memory.available", "5E+0001000"),
			`--eviction-minimum-reclaim: memory.available=5E+0001000: exponent out of range (at most ±999)`, nil},
		{"quantity longer than 64 characters", hard("memory.available", "1"+strings.Repeat("0", 70)),
			"--eviction-hard: memory.available<1" + strings.Repeat("0", 70) + ": longer than 64 characters", nil},
		{"zero quantity", hard("memory.available", "0"), "--eviction-hard: eviction threshold memory.available must be positive: 0", nil},
		{"zero quantity with unit", hard("memory.available", "0Gi"), "--eviction-hard: eviction threshold memory.available must be positive: 0", nil},
		{"negative quantity", hard("memory.available", "-1Gi"), "--eviction-hard: eviction threshold memory.available must be positive: -1Gi", nil},
		{"soft error names the soft source", Settings{Soft: map[string]string{"memory.available": "0"}, SoftSource: "config evictionSoft"},
			"config evictionSoft: eviction threshold memory.available must be positive: 0", nil},
		{"bad grace period", grace("1 minute"), `--eviction-soft-grace-period: time: unknown unit " minute" in duration "1 minute"`, nil},
		{"empty grace period", grace(""), `--eviction-soft-grace-period: time: invalid duration ""`, nil},
		{"negative grace period", grace("-1m"), "--eviction-soft-grace-period: invalid eviction grace period specified: -1m, must be a positive value", nil},
		{"soft without grace", Settings{Soft: map[string]string{"nodefs.available": "20%"}},
			"--eviction-soft: grace period must be specified for the soft eviction threshold nodefs.available", nil},
		{"soft with grace for another signal", Settings{Soft: map[string]string{"nodefs.available": "20%"}, SoftGracePeriod: map[string]string{"memory.available": "1m"}},
			"--eviction-soft: grace period must be specified for the soft eviction threshold nodefs.available", nil},
		{"zero percent reclaim", reclaim("nodefs.available", "0%"), "--eviction-minimum-reclaim: eviction percentage minimum reclaim nodefs.available must be positive: 0%", nil},
		{"negative percent reclaim", reclaim("nodefs.available", "-1%"), "--eviction-minimum-reclaim: eviction percentage minimum reclaim nodefs.available must be positive: -1%", nil},
		{"NaN percent reclaim", reclaim("nodefs.available", "NaN%"), "--eviction-minimum-reclaim: eviction percentage minimum reclaim nodefs.available must be positive: NaN%", nil},
		{"infinite percent reclaim", reclaim("nodefs.available", "Inf%"), "--eviction-minimum-reclaim: eviction percentage minimum reclaim nodefs.available must be finite: Inf%", nil},
		{"unparsable percent reclaim", reclaim("nodefs.available", "five%"), `--eviction-minimum-reclaim: strconv.ParseFloat: parsing "five": invalid syntax`, strconv.ErrSyntax},
		{"negative reclaim", reclaim("memory.available", "-1Mi"), "--eviction-minimum-reclaim: negative eviction minimum reclaim specified for memory.available", nil},
		{"unparsable reclaim", reclaim("memory.available", "lots"), "--eviction-minimum-reclaim: memory.available=lots: " + quantityFormat, resource.ErrFormatWrong},
		{"unknown enforcement", enforce("pods", "memory"),
			`invalid configuration: option "memory" specified for enforceNodeAllocatable (--enforce-node-allocatable). Valid options are "pods", "system-reserved", "system-reserved-compressible", "kube-reserved", "kube-reserved-compressible" or "none"`, nil},
		// Found by FuzzKubeletConfig: the error did not name the file.
		{"unknown enforcement from a file names the file",
			Settings{EnforceNodeAllocatable: []string{"memory"}, EnforceNodeAllocatableSource: "enforceNodeAllocatable in /etc/kubelet.yaml"},
			`enforceNodeAllocatable in /etc/kubelet.yaml: invalid configuration: option "memory" specified for enforceNodeAllocatable (--enforce-node-allocatable). Valid options are "pods", "system-reserved", "system-reserved-compressible", "kube-reserved", "kube-reserved-compressible" or "none"`, nil},
		{"unknown enforcement from the flag is not prefixed again",
			Settings{EnforceNodeAllocatable: []string{"none", "pods"}, EnforceNodeAllocatableSource: "--enforce-node-allocatable"},
			`invalid configuration: enforceNodeAllocatable (--enforce-node-allocatable) may not contain additional enforcements when "none" is specified`, nil},
		{"empty enforcement", enforce(""),
			`invalid configuration: option "" specified for enforceNodeAllocatable (--enforce-node-allocatable). Valid options are "pods", "system-reserved", "system-reserved-compressible", "kube-reserved", "kube-reserved-compressible" or "none"`, nil},
		{"none with others", enforce("none", "pods"),
			`invalid configuration: enforceNodeAllocatable (--enforce-node-allocatable) may not contain additional enforcements when "none" is specified`, nil},
		{"duplicate enforcement", enforce("pods", "pods"),
			`invalid configuration: duplicated enforcements "pods" in enforceNodeAllocatable (--enforce-node-allocatable)`, nil},
		{"system-reserved twice over", enforce("system-reserved", "system-reserved-compressible"),
			`invalid configuration: both "system-reserved" and "system-reserved-compressible" cannot be specified together in enforceNodeAllocatable (--enforce-node-allocatable)`, nil},
		{"kube-reserved twice over", enforce("kube-reserved-compressible", "kube-reserved"),
			`invalid configuration: both "kube-reserved" and "kube-reserved-compressible" cannot be specified together in enforceNodeAllocatable (--enforce-node-allocatable)`, nil},
		{"first error in sorted key order", Settings{Hard: map[string]string{"pid.available": "x", "memory.available": "0", "foo": "1"}},
			"--eviction-hard: unsupported eviction signal foo", nil},
		{"hard is checked before soft", Settings{Hard: map[string]string{"memory.available": "0"}, Soft: map[string]string{"bar": "1"}},
			"--eviction-hard: eviction threshold memory.available must be positive: 0", nil},
		{"grace is checked before minimum reclaim", Settings{SoftGracePeriod: map[string]string{"memory.available": "x"}, MinimumReclaim: map[string]string{"bar": "1"}},
			`--eviction-soft-grace-period: time: invalid duration "x"`, nil},
		{"a bad user value fails even with merge-defaults", Settings{Hard: map[string]string{"memory.available": "-1"}, MergeDefaults: true},
			"--eviction-hard: eviction threshold memory.available must be positive: -1", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(tt.s)
			if err == nil {
				t.Fatalf("got no error and %q, want %q", describe(p.Thresholds), tt.want)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("got error\n\t%s\nwant\n\t%s", got, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("got errors.Is(err, %v) false, want true", tt.is)
			}
			if p.Thresholds != nil || p.Notes != nil {
				t.Errorf("got %+v with the error, want a zero Parsed", p)
			}
		})
	}
}

// TestParseFormatReadsBack checks that thresholds in force print as text
// that parses to the same threshold; FuzzParse found "00%", in force at 0%,
// printed as "0%", the text that disables the signal.
func TestParseFormatReadsBack(t *testing.T) {
	tests := []struct{ name, value, want string }{
		{"00% is a threshold at 0", "00%", "nodefs.available<0.0%"},
		{"0.0% is a threshold at 0", "0.0%", "nodefs.available<0.0%"},
		{"-0% keeps its sign", "-0%", "nodefs.available<-0%"},
		{"100.0% is a threshold at 100", "100.0%", "nodefs.available<100.0%"},
		{"100%% is a threshold at 100", "100%%", "nodefs.available<100.0%"},
		{"99.999% stays below 100", "99.999%", "nodefs.available<99.999%"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(Settings{Hard: map[string]string{"nodefs.available": tt.value}})
			if err != nil {
				t.Fatal(err)
			}
			th := p.Thresholds[0]
			if got := Format(th); got != tt.want {
				t.Fatalf("Format: got %q, want %q", got, tt.want)
			}
			again, err := Parse(Settings{Hard: map[string]string{"nodefs.available": FormatValue(th)}})
			if err != nil {
				t.Fatal(err)
			}
			if len(again.Thresholds) != 1 || again.Thresholds[0].Value.Percentage != th.Value.Percentage {
				t.Errorf("%q reads back as %q, want %v", FormatValue(th), describe(again.Thresholds), th.Value.Percentage)
			}
		})
	}
}

func TestParseEnforceNodeAllocatable(t *testing.T) {
	for _, vals := range [][]string{nil, {}, {"none"}, {"pods"}, {"pods", "system-reserved", "kube-reserved"},
		{"pods", "system-reserved-compressible", "kube-reserved-compressible"}} {
		if _, err := Parse(Settings{EnforceNodeAllocatable: vals}); err != nil {
			t.Errorf("enforce-node-allocatable=%q: got %v, want no error", vals, err)
		}
	}
}

func TestParseDefaultsAndNotes(t *testing.T) {
	tests := []struct {
		name      string
		s         Settings
		want      []string
		wantNotes []string
	}{{
		name: "a partial map replaces the defaults and says which",
		s:    Settings{Hard: map[string]string{"memory.available": "500Mi", "nodefs.available": "0%"}, HardSource: "config evictionHard"},
		want: []string{"memory.available<500Mi hard (config evictionHard)"},
		wantNotes: []string{"config evictionHard replaces the default hard thresholds, so nodefs.inodesFree<5%, imagefs.available<15%, imagefs.inodesFree<5% no longer apply (as in the kubelet); " +
			"list them, or set mergeDefaultEvictionSettings, to keep them"},
	}, {
		name: "an empty map drops every default",
		s:    Settings{Hard: map[string]string{}},
		want: []string{},
		wantNotes: []string{"--eviction-hard replaces the default hard thresholds, so memory.available<100Mi, nodefs.available<10%, nodefs.inodesFree<5%, imagefs.available<15%, imagefs.inodesFree<5% no longer apply (as in the kubelet); " +
			"list them, or set mergeDefaultEvictionSettings, to keep them"},
	}, {
		name: "a map naming every default signal drops nothing",
		s:    Settings{Hard: map[string]string{"memory.available": "1Gi", "nodefs.available": "5%", "nodefs.inodesFree": "0%", "imagefs.available": "100%", "imagefs.inodesFree": "1%"}},
		want: []string{"memory.available<1Gi hard (--eviction-hard)", "nodefs.available<5% hard (--eviction-hard)", "imagefs.inodesFree<1% hard (--eviction-hard)"},
	}, {
		name: "merge-defaults adds the missing defaults; 0% still disables one",
		s:    Settings{Hard: map[string]string{"memory.available": "1Gi", "imagefs.available": "0%", "pid.available": "1000"}, MergeDefaults: true},
		want: []string{
			"memory.available<1Gi hard (--eviction-hard)",
			"nodefs.available<10% hard (default)",
			"nodefs.inodesFree<5% hard (default)",
			"imagefs.inodesFree<5% hard (default)",
			"pid.available<1k hard (--eviction-hard)",
		},
		wantNotes: []string{"merge-defaults added the default hard thresholds missing from --eviction-hard: nodefs.available<10%, nodefs.inodesFree<5%, imagefs.inodesFree<5%"},
	}, {
		name: "merge-defaults with no map is just the defaults",
		s:    Settings{MergeDefaults: true, HardSource: "config evictionHard"},
		want: []string{
			"memory.available<100Mi hard (default)", "nodefs.available<10% hard (default)", "nodefs.inodesFree<5% hard (default)",
			"imagefs.available<15% hard (default)", "imagefs.inodesFree<5% hard (default)",
		},
	}, {
		name: "soft 0s, unused grace period and minimum reclaim",
		s: Settings{
			Hard:            map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%", "imagefs.inodesFree": "5%"},
			Soft:            map[string]string{"memory.available": "1Gi", "nodefs.available": "0%"},
			SoftGracePeriod: map[string]string{"memory.available": "0s", "nodefs.available": "1m", "pid.available": "1m"},
			MinimumReclaim:  map[string]string{"pid.available": "100", "imagefs.available": "1Gi"},
		},
		want: []string{
			"memory.available<100Mi hard (--eviction-hard)",
			"memory.available<1Gi soft grace=0s (treated as hard) (--eviction-soft)",
			"nodefs.available<10% hard (--eviction-hard)",
			"nodefs.inodesFree<5% hard (--eviction-hard)",
			"imagefs.available<15% hard minReclaim=1Gi (--eviction-hard)",
			"imagefs.inodesFree<5% hard (--eviction-hard)",
		},
		wantNotes: []string{
			"--eviction-soft: memory.available<1Gi has a 0s grace period; evictd treats it as a hard threshold (evicts at once, with the hard-eviction pod grace period)",
			"--eviction-soft-grace-period: the grace period for nodefs.available has no effect: there is no soft threshold for that signal",
			"--eviction-soft-grace-period: the grace period for pid.available has no effect: there is no soft threshold for that signal",
			"--eviction-minimum-reclaim: the minimum reclaim for pid.available has no effect: no threshold was set for that signal",
		},
	}, {
		name: "zero and full percentages that the kubelet does not ignore",
		s:    Settings{Hard: map[string]string{"memory.available": "100Mi", "nodefs.available": "-0%", "nodefs.inodesFree": "100.00%", "imagefs.available": "15%", "imagefs.inodesFree": "5%"}},
		want: []string{
			"memory.available<100Mi hard (--eviction-hard)",
			"nodefs.available<-0% hard (--eviction-hard)",
			"nodefs.inodesFree<100.0% hard (--eviction-hard)",
			"imagefs.available<15% hard (--eviction-hard)",
			"imagefs.inodesFree<5% hard (--eviction-hard)",
		},
		wantNotes: []string{
			"--eviction-hard: nodefs.available<-0% is a zero threshold and is never met; only the exact text 0% disables a signal",
			"--eviction-hard: nodefs.inodesFree<100.0% equals the capacity, so it is met as soon as anything is used; only the exact text 100% disables a signal",
		},
	}, {
		name: "containerfs entries are announced as replaced",
		s: Settings{
			Hard:            map[string]string{"containerfs.available": "10%"},
			Soft:            map[string]string{"containerfs.inodesFree": "10%"},
			SoftGracePeriod: map[string]string{"containerfs.inodesFree": "1m"},
			MergeDefaults:   true,
		},
		want: []string{
			"memory.available<100Mi hard (default)", "nodefs.available<10% hard (default)", "nodefs.inodesFree<5% hard (default)",
			"imagefs.available<15% hard (default)", "imagefs.inodesFree<5% hard (default)",
			"containerfs.available<10% hard (--eviction-hard)",
			"containerfs.inodesFree<10% soft grace=1m0s (--eviction-soft)",
		},
		wantNotes: []string{
			"merge-defaults added the default hard thresholds missing from --eviction-hard: memory.available<100Mi, nodefs.available<10%, nodefs.inodesFree<5%, imagefs.available<15%, imagefs.inodesFree<5%",
			"--eviction-hard: containerfs.available<10% is replaced: containerfs thresholds are derived from nodefs or imagefs according to the filesystem layout, as the kubelet does",
			"--eviction-soft: containerfs.inodesFree<10% is replaced: containerfs thresholds are derived from nodefs or imagefs according to the filesystem layout, as the kubelet does",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(tt.s)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := describe(p.Thresholds); !slices.Equal(got, tt.want) {
				t.Errorf("got\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(tt.want, "\n\t"))
			}
			if !slices.Equal(p.Notes, tt.wantNotes) {
				t.Errorf("got notes\n\t%s\nwant\n\t%s", strings.Join(p.Notes, "\n\t"), strings.Join(tt.wantNotes, "\n\t"))
			}
		})
	}
}

func TestParseAllocatable(t *testing.T) {
	tests := []struct {
		name      string
		s         Settings
		want      []string
		wantNotes []string
	}{{
		name: "pods derives from the default memory threshold",
		s:    Settings{EnforceNodeAllocatable: []string{"pods"}},
		want: []string{
			"memory.available<100Mi hard (default)",
			"allocatableMemory.available<100Mi hard (derived from memory.available (enforce-node-allocatable=pods))",
			"nodefs.available<10% hard (default)", "nodefs.inodesFree<5% hard (default)",
			"imagefs.available<15% hard (default)", "imagefs.inodesFree<5% hard (default)",
		},
	}, {
		name:      "no derivation without pods",
		s:         Settings{Hard: map[string]string{"memory.available": "1Gi"}, EnforceNodeAllocatable: []string{"system-reserved", "kube-reserved"}},
		want:      []string{"memory.available<1Gi hard (--eviction-hard)"},
		wantNotes: []string{droppedNote("--eviction-hard", "nodefs.available<10%, nodefs.inodesFree<5%, imagefs.available<15%, imagefs.inodesFree<5%")},
	}, {
		name:      "no derivation with none",
		s:         Settings{Hard: map[string]string{"memory.available": "1Gi"}, HardSource: "flags", EnforceNodeAllocatable: []string{"none"}},
		want:      []string{"memory.available<1Gi hard (flags)"},
		wantNotes: []string{droppedNote("flags", "nodefs.available<10%, nodefs.inodesFree<5%, imagefs.available<15%, imagefs.inodesFree<5%")},
	}, {
		name: "the minimum reclaim is copied, soft thresholds are not",
		s: Settings{
			Hard:                   map[string]string{"memory.available": "5%"},
			Soft:                   map[string]string{"memory.available": "10%"},
			SoftGracePeriod:        map[string]string{"memory.available": "1m"},
			MinimumReclaim:         map[string]string{"memory.available": "200Mi"},
			EnforceNodeAllocatable: []string{"pods"},
		},
		want: []string{
			"memory.available<5% hard minReclaim=200Mi (--eviction-hard)",
			"memory.available<10% soft grace=1m0s minReclaim=200Mi (--eviction-soft)",
			"allocatableMemory.available<5% hard minReclaim=200Mi (derived from memory.available (enforce-node-allocatable=pods))",
		},
		wantNotes: []string{droppedNote("--eviction-hard", "nodefs.available<10%, nodefs.inodesFree<5%, imagefs.available<15%, imagefs.inodesFree<5%")},
	}, {
		name: "a soft threshold with 0s grace acts as hard and is copied as such",
		s: Settings{
			Hard:                   map[string]string{},
			Soft:                   map[string]string{"memory.available": "1Gi"},
			SoftGracePeriod:        map[string]string{"memory.available": "0s"},
			EnforceNodeAllocatable: []string{"pods"},
		},
		want: []string{
			"memory.available<1Gi soft grace=0s (treated as hard) (--eviction-soft)",
			"allocatableMemory.available<1Gi soft grace=0s (treated as hard) (derived from memory.available (enforce-node-allocatable=pods))",
		},
		wantNotes: []string{
			droppedNote("--eviction-hard", "memory.available<100Mi, nodefs.available<10%, nodefs.inodesFree<5%, imagefs.available<15%, imagefs.inodesFree<5%"),
			"--eviction-soft: memory.available<1Gi has a 0s grace period; evictd treats it as a hard threshold (evicts at once, with the hard-eviction pod grace period)",
		},
	}, {
		name: "an explicit allocatable threshold is kept and nothing is derived",
		s: Settings{
			Hard:                   map[string]string{"memory.available": "100Mi", "allocatableMemory.available": "500Mi"},
			MinimumReclaim:         map[string]string{"allocatableMemory.available": "1Gi"},
			EnforceNodeAllocatable: []string{"pods"},
			MergeDefaults:          true,
		},
		want: []string{
			"memory.available<100Mi hard (--eviction-hard)",
			"allocatableMemory.available<500Mi hard minReclaim=1Gi (--eviction-hard)",
			"nodefs.available<10% hard (default)", "nodefs.inodesFree<5% hard (default)",
			"imagefs.available<15% hard (default)", "imagefs.inodesFree<5% hard (default)",
		},
		wantNotes: []string{
			"merge-defaults added the default hard thresholds missing from --eviction-hard: nodefs.available<10%, nodefs.inodesFree<5%, imagefs.available<15%, imagefs.inodesFree<5%",
			"allocatableMemory.available<500Mi from --eviction-hard is kept; allocatableMemory.available<100Mi is not derived from memory.available<100Mi for enforce-node-allocatable=pods",
		},
	}, {
		name:      "no memory threshold, nothing to derive",
		s:         Settings{Hard: map[string]string{"memory.available": "0%", "nodefs.available": "5%"}, EnforceNodeAllocatable: []string{"pods"}},
		want:      []string{"nodefs.available<5% hard (--eviction-hard)"},
		wantNotes: []string{droppedNote("--eviction-hard", "nodefs.inodesFree<5%, imagefs.available<15%, imagefs.inodesFree<5%")},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(tt.s)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := describe(p.Thresholds); !slices.Equal(got, tt.want) {
				t.Errorf("got\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(tt.want, "\n\t"))
			}
			if !slices.Equal(p.Notes, tt.wantNotes) {
				t.Errorf("got notes\n\t%s\nwant\n\t%s", strings.Join(p.Notes, "\n\t"), strings.Join(tt.wantNotes, "\n\t"))
			}
		})
	}
}

// droppedNote is the note for a partial hard map that drops defaults.
func droppedNote(source, dropped string) string {
	return source + " replaces the default hard thresholds, so " + dropped +
		" no longer apply (as in the kubelet); list them, or set mergeDefaultEvictionSettings, to keep them"
}

func TestParseDerivedSharesNothing(t *testing.T) {
	p, err := Parse(Settings{
		Hard:                   map[string]string{"memory.available": "1Gi"},
		MinimumReclaim:         map[string]string{"memory.available": "1Gi"},
		EnforceNodeAllocatable: []string{"pods"},
	})
	if err != nil {
		t.Fatal(err)
	}
	mem, alloc := p.Thresholds[0], p.Thresholds[1]
	if mem.Value.Quantity == alloc.Value.Quantity || mem.MinReclaim == alloc.MinReclaim || mem.MinReclaim.Quantity == alloc.MinReclaim.Quantity {
		t.Errorf("got %s and %s sharing pointers, want independent copies", mem.Describe(), alloc.Describe())
	}
}

func TestParseKeysAreUnique(t *testing.T) {
	p, err := Parse(Settings{
		Hard:                   map[string]string{"memory.available": "1Gi", "allocatableMemory.available": "1Gi", "nodefs.available": "1%"},
		Soft:                   map[string]string{"memory.available": "2Gi", "allocatableMemory.available": "2Gi", "nodefs.available": "2%"},
		SoftGracePeriod:        map[string]string{"memory.available": "0s", "allocatableMemory.available": "1m", "nodefs.available": "1m"},
		EnforceNodeAllocatable: []string{"pods"},
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[Key]bool{}
	for _, th := range p.Thresholds {
		if seen[th.Key()] {
			t.Errorf("got key %+v twice in %q, want unique keys", th.Key(), describe(p.Thresholds))
		}
		seen[th.Key()] = true
	}
	if len(p.Thresholds) != 6 {
		t.Errorf("got %d thresholds %q, want 6", len(p.Thresholds), describe(p.Thresholds))
	}
}

func TestDefaultHard(t *testing.T) {
	m := DefaultHard()
	m["memory.available"] = "1Gi" // a copy: must not change the defaults
	p, err := Parse(Settings{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := Format(p.Thresholds[0]), "memory.available<100Mi"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if got, want := len(DefaultHard()), 5; got != want {
		t.Errorf("got %d defaults, want %d", got, want)
	}
}

// FuzzParseStatement checks that no hard or soft value panics, and that
// whatever is accepted is a value the evaluation can use.
func FuzzParseStatement(f *testing.F) {
	for _, s := range []string{"", "%", "0%", "100%", "-0%", "NaN%", "nan%", "+Inf%", "1e400%", "  5%", "5%%", "1e-50%",
		"100Mi", "0", "-1", "1e400", "1e18", "9223372036854775807", "9223372036854775808Ki", "0.0000000001", "1Ei", "12Ee"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for _, s := range []Settings{
			{Hard: map[string]string{"memory.available": v}},
			{Soft: map[string]string{"nodefs.available": v}, SoftGracePeriod: map[string]string{"nodefs.available": v}},
			{Hard: map[string]string{"pid.available": "1"}, MinimumReclaim: map[string]string{"pid.available": v}},
		} {
			p, err := Parse(s)
			if err != nil {
				continue
			}
			for _, th := range p.Thresholds {
				if th.Value.Quantity == nil {
					if pc := th.Value.Percentage; !(pc >= 0 && pc <= 1) {
						t.Errorf("%q: accepted percentage %v, want one in [0, 1]", v, pc)
					}
				} else if th.Value.Quantity.Sign() <= 0 {
					t.Errorf("%q: accepted quantity %s, want a positive one", v, th.Value.Quantity)
				}
				if th.GracePeriod < 0 {
					t.Errorf("%q: accepted grace period %v", v, th.GracePeriod)
				}
				if mr := th.MinReclaim; mr != nil && mr.Quantity == nil && !(mr.Percentage > 0 && finite(float64(mr.Percentage))) {
					t.Errorf("%q: accepted minimum reclaim percentage %v", v, mr.Percentage)
				}
				_ = th.Describe()
				_ = Quantity(th.Value, 1<<40)
			}
		}
	})
}

// parseOne is a shortcut for tests elsewhere: one hard threshold.
func parseOne(t *testing.T, sig signals.Signal, val string) Threshold {
	t.Helper()
	p, err := Parse(Settings{Hard: map[string]string{string(sig): val}})
	if err != nil || len(p.Thresholds) != 1 {
		t.Fatalf("Parse %s<%s: got %v, %v; want one threshold", sig, val, describe(p.Thresholds), err)
	}
	return p.Thresholds[0]
}

// TestParseQuantityBounds: the exponent and length bounds let through every
// quantity a setting needs, with resource.ParseQuantity's value.
func TestParseQuantityBounds(t *testing.T) {
	for _, s := range []string{"100Mi", "1E", "2Ei", "1e6", "1E6", "1e999", "1e-999", "5e+0999", "-1e3", "0.5", "+2Gi", "1" + strings.Repeat("0", 63)} {
		got, err := ParseQuantity(s)
		if err != nil {
			t.Errorf("%q: %v", s, err)
			continue
		}
		if want := resource.MustParse(s); got.Cmp(want) != 0 {
			t.Errorf("%q: got %s, want %s", s, got.String(), want.String())
		}
	}
}
